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
from typing import NoReturn

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


def _spin() -> NoReturn:
    while True:
        pass


def main() -> int:
    """Behave as the file says; answer as the real child does where there is an answer."""
    _, data = read_confined()
    behaviour = data.split(b" ", 1)[0]
    out = sys.stdout.buffer
    if behaviour == b"environment":
        answer(lambda _: Extracted(text=json.dumps(dict(os.environ)), pages=None), data, out)
    elif behaviour == b"echo":
        answer(lambda file: Extracted(text=file.decode(), pages=None), data, out)
    elif behaviour == b"allocate":
        answer(_allocate, data, out)
    elif behaviour == b"raise":
        answer(_raise, data, out)
    elif behaviour == b"spin":
        _spin()
    elif behaviour == b"sleep":
        time.sleep(3600)
    elif behaviour == b"exit":
        os._exit(3)
    elif behaviour == b"flood":
        while True:  # until the file-size limit stops the writes
            out.write(b"x" * MIB)
    elif behaviour == b"nonsense":
        out.write(b"this is not an answer\n")
    elif behaviour == b"short":
        out.write(b'{"outcome": "extracted", "pages": null, "textBytes": 10}\nabc')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
