"""What every capability's starter shares: the stop protocol, a polling loop, a log file.

The composition root (`outlast.local.stack.LocalStack`) starts one starter per capability and
stops them all in three passes, each over the starters in one declared order: `stop_intake` (no
new work: pollers, schedules, the HTTP front), then `stop` (tell servers and processes to end,
without waiting), then `join` (wait, up to one deadline shared by every starter). So one slow
exit never queues the others, and a starter only says what it owns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

Log = Callable[[str], None]


class Starter:
    """One capability of the local stack: what it runs, and how it stops. Every pass is optional."""

    def stop_intake(self) -> None:
        """Stop taking new work (pollers, schedules, fronts); returns at once."""

    def stop(self) -> None:
        """Tell its servers and processes to end; does not wait for them."""

    def join(self, deadline: float) -> None:
        """Wait for what `stop` ended, until `deadline` (time.monotonic())."""


def remaining(deadline: float) -> float:
    """Seconds left before `deadline`, at least a tenth: every wait gets a chance to finish."""
    return max(0.1, deadline - time.monotonic())


class Loop:
    """A daemon thread running `step` until stopped; exceptions are logged, not fatal."""

    def __init__(self, name: str, step: Callable[[], object], pause: float, log: Log) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(step, pause, log), name=name, daemon=True)

    def _run(self, step: Callable[[], object], pause: float, log: Log) -> None:
        while not self._stop.is_set():
            try:
                step()
            except Exception as error:  # noqa: BLE001 - a poller must outlive one bad round
                if not self._stop.is_set():
                    log(f"[{self._thread.name}] {type(error).__name__}: {error}")
            self._stop.wait(pause)

    def start(self) -> Loop:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout=timeout)


class Loops(Starter):
    """A starter whose work is polling loops (pollers, schedules, the reaper): intake is the loops."""

    def __init__(self) -> None:
        self.loops: list[Loop] = []

    def run(self, name: str, step: Callable[[], object], pause: float, log: Log) -> None:
        """Start a loop this starter stops."""
        self.loops.append(Loop(name, step, pause, log).start())

    def stop_intake(self) -> None:
        for loop in self.loops:
            loop.stop()

    def join(self, deadline: float) -> None:
        for loop in self.loops:
            loop.join(timeout=remaining(deadline))


def file_log(path: Path, echo: Log | None = None) -> Log:
    """A log appending lines to `path` (flushed: other processes tail it), echoed when `echo` is given."""
    lock = threading.Lock()
    handle = path.open("a", encoding="utf-8")

    def log(line: str) -> None:
        with lock:
            handle.write(line + "\n")
            handle.flush()
        if echo is not None:
            echo(line)

    return log
