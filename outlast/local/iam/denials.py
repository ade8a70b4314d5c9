"""The record of every call local mode denied: one JSON line each, in the stack's state directory.

Function processes and the stack's own pollers append to the same file (one short `write` per
line on a file opened for appending, so lines from several processes never interleave); the
stack logs each new line, and the tests, chaos and the demo count them.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path


@dataclass(frozen=True)
class Denial:
    """One denied call: who, what on which resource, and why."""

    function: str  # the function's logical id (its log is .local/logs-PORT/<id>.log)
    action: str
    resource: str
    call: str  # service.Operation, as boto3 named it
    reason: str
    at: str = ""

    def line(self) -> str:
        """How the stack's log shows it."""
        return f"[iam] DENIED {self.function}: {self.action} on {self.resource} ({self.call}: {self.reason})"


class DenialLog:
    """Appends denials to a JSON-lines file and reads them back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def record(self, denial: Denial) -> None:
        """Append one denial (stamped now)."""
        stamped = Denial(**{**asdict(denial), "at": datetime.now(UTC).isoformat(timespec="milliseconds")})
        data = (json.dumps(asdict(stamped)) + "\n").encode()
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, data)
        finally:
            os.close(descriptor)

    def read(self) -> list[Denial]:
        """Every denial recorded so far."""
        if not self.path.exists():
            return []
        return [_parse(line) for line in self.path.read_text().splitlines() if line.strip()]

    def new(self) -> list[Denial]:
        """The denials recorded since the last call (whole lines only)."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        return [_parse(line) for line in complete.decode().splitlines() if line.strip()]

    def clear(self) -> None:
        """Start from no denials (a new stack on the same port)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")
        self._offset = 0


def _parse(line: str) -> Denial:
    return Denial(**json.loads(line))
