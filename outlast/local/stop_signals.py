"""Waiting in the main thread for Ctrl-C or SIGTERM, in a process full of threads.

Why not `threading.Event().wait()` with a handler that sets the event: Linux hands a
process-wide signal to any thread that does not block it, and CPython runs the Python-level
handler only in the main thread, the next time that thread runs bytecode. A main thread
parked in an untimed lock wait is not woken when another thread took the signal, so the stop
never comes (seen as a local stack that ignored Ctrl-C until it was killed). Sleeping in short
steps bounds that delay. The handler only appends to a list: taking a lock in a handler (as
`Event.set` does) can deadlock against that same lock held by the main thread it interrupted.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
POLL_SECONDS = 0.2

_Handler = Callable[[int, FrameType | None], Any] | int | None


class StopSignals:
    """SIGINT and SIGTERM recorded from `install()` on; `wait()` returns once one has come."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._previous: dict[int, _Handler] = {}

    def install(self) -> StopSignals:
        """Take over SIGINT and SIGTERM (main thread only, as for any `signal.signal`)."""
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._record)
        return self

    def restore(self) -> None:
        """Give SIGINT and SIGTERM back to the handlers they had before `install()`."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    @property
    def stop_requested(self) -> bool:
        return bool(self.received)

    def wait(self) -> int:
        """Block until a stop signal has come; the first one's number."""
        while not self.received:
            time.sleep(POLL_SECONDS)
        return self.received[0]

    def _record(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
