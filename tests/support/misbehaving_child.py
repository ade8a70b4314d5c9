"""An extraction child that misbehaves on request: the file's first word says how.

It confines itself and answers through the real child's functions, so what it shows is what
the sandbox and the child's harness do when a parser loops, allocates without end, hangs,
crashes or answers nonsense. Run as `python -m tests.support.misbehaving_child REQUEST`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import BinaryIO

from functions.ingest.child import answer, read_confined
from shared.documents.extraction import Extracted

MIB = 1024 * 1024
# Where "allocate" gives up if no limit stopped it first (then it answers, and the test fails).
_ALLOCATION_CAP = 1024 * MIB


def _allocate(_: bytes) -> Extracted:
    held: list[bytearray] = []
    while len(held) * MIB < _ALLOCATION_CAP:
        held.append(bytearray(MIB))
    return Extracted(text=f"allocated {len(held)} MiB without a MemoryError", pages=None)


def _raise(_: bytes) -> Extracted:
    raise ValueError("a parser's exception text, which may quote the file: secret-in-the-file")


# Behaviours that answer through the real child's `answer`: what their extractor does.
_EXTRACTORS: dict[bytes, Callable[[bytes], Extracted]] = {
    b"environment": lambda _: Extracted(text=json.dumps(dict(os.environ)), pages=None),
    b"echo": lambda file: Extracted(text=file.decode(), pages=None),
    b"allocate": _allocate,
    b"raise": _raise,
}


def _spin(_: BinaryIO) -> None:
    while True:
        pass


def _flood(out: BinaryIO) -> None:
    while True:  # until the file-size limit stops the writes
        out.write(b"x" * MIB)


# Behaviours that give no answer, or not one the real child would.
_MISDEEDS: dict[bytes, Callable[[BinaryIO], object]] = {
    b"spin": _spin,
    b"sleep": lambda _: time.sleep(3600),
    b"exit": lambda _: os._exit(3),
    b"flood": _flood,
    b"nonsense": lambda out: out.write(b"this is not an answer\n"),
    b"short": lambda out: out.write(b'{"outcome": "extracted", "pages": null, "textBytes": 10}\nabc'),
}


def main() -> int:
    """Behave as the file says; answer as the real child does where there is an answer."""
    _, data = read_confined()
    behaviour = data.split(b" ", 1)[0]
    out = sys.stdout.buffer
    if behaviour in _EXTRACTORS:
        answer(_EXTRACTORS[behaviour], data, out)
    else:
        _MISDEEDS[behaviour](out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
