"""Following a streaming job's text until the job ends (DESIGN.md, "Streaming output").

The persisted events are the truth and the socket the fast path, as for status updates:
`OutputFollower.follow` first catches up from GET /v1/jobs/{id}/output, then follows the job over
the WebSocket from where it stands (`{"action": "follow", "after": ...}`: the API replays what it
missed, then pushes new events). When the socket drops, it opens a new one and follows again from
its last contiguous event; when none can be had, it polls GET .../output. The job's status updates
(pushed to every connection of the owner) say when it ended: a last catch-up then reads until the
page is `complete` and shows the result's attempt. A quiet socket is checked with a GET every
LIVE_RECHECK_SECONDS, so a missed push costs only that much latency.

What it shows goes to an `OutputSink` (the command line prints; the Python client collects).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Protocol

from outlast.api.http import TERMINAL_STATUSES, HttpApi
from outlast.api.models import OutputPage
from outlast.follow import LIVE_RECHECK_SECONDS, TimeUpError
from outlast.live import FollowAnswer, LiveUpdates, LiveUpdatesError, OutputPush, Update, open_live
from outlast.reassembly import Reassembly
from outlast.retry import with_retries

POLL_SECONDS = 1.0  # GET .../output this often while no socket can be had
RECONNECTS = 3  # new sockets tried after a drop before polling instead


class OutputUnavailableError(Exception):
    """The API refused to follow the job (it is not the caller's, or it is gone)."""


class OutputSink(Protocol):
    """Where the followed text goes."""

    def event(self, attempt: int, seq: int, text: str) -> None:
        """A new event (each once, in arrival order)."""

    def changed(self, text: Reassembly) -> None:
        """The text shown grew, or another attempt is shown."""


class OutputFollower:
    """Follows one job's output through one API; `notify` hears what a person would want to know."""

    def __init__(
        self,
        api: HttpApi,
        notify: Callable[[str], None] = lambda _message: None,
        pause: Callable[[float], None] = time.sleep,
    ) -> None:
        self._api = api
        self._notify = notify
        self._pause = pause

    def catch_up(
        self, job_id: str, text: Reassembly, sink: OutputSink, deadline: float | None = None
    ) -> bool:
        """Read every event after what `text` holds; True once the output is complete (the job ended
        and every event is read; `text` then shows the result's attempt)."""
        after = _cursor(text.cursor())
        while True:
            page = self._page(job_id, after, deadline)
            for event in page.events:
                _take(text, sink, event.attempt, event.seq, event.text)
            if page.complete:
                return self._settle(job_id, text, sink, page.result_attempt, deadline)
            if not page.events or page.next_cursor is None:
                return False
            after = page.next_cursor

    def _page(self, job_id: str, after: str, deadline: float | None) -> OutputPage:
        return with_retries(
            partial(self._api.get_output, job_id, after=after),
            "the output request",
            notify=self._notify,
            deadline=deadline,
        ).document

    def follow(self, job_id: str, text: Reassembly, sink: OutputSink, deadline: float | None = None) -> None:
        """Follow the job's output until it is complete (TimeUpError when `deadline` passes first)."""
        if self.catch_up(job_id, text, sink, deadline):
            return
        reconnects = RECONNECTS
        while True:
            live = self._open()
            if live is None:
                break
            with live:
                try:
                    if self._follow_socket(job_id, live, text, sink, deadline):
                        return
                except LiveUpdatesError as error:
                    self._notify(f"live output stopped ({error})")
            reconnects -= 1
            if reconnects < 0:
                break
            self._notify("reconnecting, to go on from the last event received")
        self._notify("following the output by polling")
        while not self.catch_up(job_id, text, sink, deadline):
            _check(deadline)
            self._pause(POLL_SECONDS)

    def _open(self) -> LiveUpdates | None:
        try:
            return open_live(self._api)
        except LiveUpdatesError as error:
            self._notify(f"live output unavailable ({error})")
            return None

    def _follow_socket(
        self, job_id: str, live: LiveUpdates, text: Reassembly, sink: OutputSink, deadline: float | None
    ) -> bool:
        """Follow over one socket; True once the output is complete (LiveUpdatesError if it drops)."""
        live.follow(job_id, text.cursor())
        quiet_since = time.monotonic()
        while True:
            _check(deadline)
            pushed = live.next_message(1.0)
            if isinstance(pushed, OutputPush) and pushed.job_id == job_id:
                _take(text, sink, pushed.attempt, pushed.seq, pushed.text)
                quiet_since = time.monotonic()
            elif (
                isinstance(pushed, FollowAnswer)
                and pushed.kind == "error"
                and pushed.job_id in {job_id, None}
            ):
                raise OutputUnavailableError(pushed.code or "the API refused to follow the job")
            elif isinstance(pushed, Update) and pushed.document.job_id == job_id:
                if pushed.document.status in TERMINAL_STATUSES:
                    # Ended: every event is written; read the rest and the result's attempt.
                    while not self.catch_up(job_id, text, sink, deadline):
                        self._pause(POLL_SECONDS)
                    return True
            elif time.monotonic() - quiet_since >= LIVE_RECHECK_SECONDS:
                if self.catch_up(job_id, text, sink, deadline):
                    return True
                quiet_since = time.monotonic()

    def _settle(
        self,
        job_id: str,
        text: Reassembly,
        sink: OutputSink,
        result_attempt: int | None,
        deadline: float | None,
    ) -> bool:
        shown = text.shown_attempt
        text.settle(result_attempt)
        if result_attempt is not None and result_attempt != shown:
            # The result holds an earlier attempt than the newest (adopted): read what is missing of it.
            after = _cursor((result_attempt, text.last_seq(result_attempt)))
            page = self._page(job_id, after, deadline)
            for event in page.events:
                _take(text, sink, event.attempt, event.seq, event.text)
        sink.changed(text)
        return True


def _take(text: Reassembly, sink: OutputSink, attempt: int, seq: int, piece: str) -> None:
    if text.seen(attempt, seq):
        return
    changed = text.add(attempt, seq, piece)
    sink.event(attempt, seq, piece)
    if changed:
        sink.changed(text)


def _cursor(position: tuple[int, int]) -> str:
    return f"{position[0]}.{position[1]}"


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() >= deadline:
        raise TimeUpError
