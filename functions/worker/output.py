"""One streaming call's events: its text trimmed, buffered and written as `{jobId, attempt, seq, text}`.

The provider hands each piece of text to `write` on the call's own thread, in order; the worker
calls `finish` once the call has ended (or was stopped), from another thread, and `close` when it
lost the job. A lock keeps the two apart, so `seq` counts from 1 without a gap or a repeat whatever
the timing, and nothing is written after `finish` or `close`. Each event is one conditional put of
at most `streamFlushBytes` bytes of text (one write unit). A put that fails stops the call (the job
is handed back and the next claim streams a new attempt): later text of this attempt is never
written, so its events stay a gapless prefix of what it received.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from functions.worker.flush import EdgeTrim, FlushPolicy
from shared.observability import logger
from shared.output import OutputEvent
from shared.output_ports import OutputEventStore
from shared.ports import StreamControl


class OutputWriter:
    """The events of one output attempt of one job."""

    def __init__(
        self,
        store: OutputEventStore,
        job_id: str,
        attempt: int,
        policy: FlushPolicy,
        *,
        expires_at: datetime,
        monotonic: Callable[[], float],
        control: StreamControl,
    ) -> None:
        self._store = store
        self._job_id = job_id
        self.attempt = attempt
        self._policy = policy
        self._trim = EdgeTrim()
        self._expires_at = expires_at
        self._monotonic = monotonic
        self._control = control
        self._lock = threading.Lock()
        self._closed = False
        self._received: list[str] = []
        self.events_written = 0
        self.failure: Exception | None = None  # the put that failed, which stopped the call

    @property
    def received(self) -> str:
        """Every piece of text the call delivered, untrimmed (what an estimate of its usage counts)."""
        return "".join(self._received)

    def write(self, delta: str) -> None:
        """One piece of streamed text (the provider's thread)."""
        with self._lock:
            if self._closed:
                return
            self._received.append(delta)
            self._put(self._policy.add(self._trim.feed(delta), self._monotonic()))

    def finish(self) -> None:
        """The call ended: write what is buffered, then nothing more."""
        with self._lock:
            if not self._closed:
                self._put(self._policy.finish(self._monotonic()))
                self._closed = True

    def close(self) -> None:
        """Write nothing more (the job was lost: its holder writes nothing)."""
        with self._lock:
            self._closed = True

    def _put(self, pieces: list[str]) -> None:
        for text in pieces:
            if self.failure is not None:
                return
            event = OutputEvent(
                job_id=self._job_id, attempt=self.attempt, seq=self.events_written + 1, text=text
            )
            try:
                self._store.put_event(event, self._expires_at)
            except Exception as error:  # noqa: BLE001 - whatever it is, this attempt cannot go on gapless
                logger.warning("an output event could not be written; stopping the call")
                self.failure = error
                self._closed = True
                self._control.stop()
                return
            self.events_written += 1
