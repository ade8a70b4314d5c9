"""Following one job until it ends: pushed updates over the WebSocket when it opens, polling
(Retry-After) otherwise or once it fails (DESIGN.md, "Live updates": the socket is the fast path,
the persisted job the truth).

Used by `outlast submit --wait`, `status --wait`, `watch JOB_ID` and `Client.wait`; what each
shows while it waits is a `Display`. The first GET comes once the socket is open, so a change
made before it opened cannot be missed; a quiet socket is checked with a GET every
LIVE_RECHECK_SECONDS, so a missed push costs only that much latency.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from outlast.api.http import TERMINAL_STATUSES, Answer, HttpApi, JsonObject
from outlast.api.models import StatusDocument
from outlast.live import LiveUpdates, LiveUpdatesError, Update, open_live
from outlast.retry import FALLBACK_POLL_SECONDS, with_retries

LIVE_RECHECK_SECONDS = 30  # following the socket, a GET after this long without a push


class TimeUpError(Exception):
    """The wait's deadline passed between two reads (the job goes on)."""


@dataclass
class Followed:
    """The newest status document of one job seen so far, from a GET or a pushed update."""

    document: StatusDocument
    body: JsonObject
    retry_after: int | None = None

    @classmethod
    def of(cls, answer: Answer[StatusDocument]) -> Followed:
        """Start from an answer of the API (a submit's or a GET's)."""
        return cls(answer.document, answer.body, answer.retry_after)

    @property
    def terminal(self) -> bool:
        """True once the job ended."""
        return self.document.status in TERMINAL_STATUSES

    def read(self, answer: Answer[StatusDocument]) -> None:
        """A GET: the persisted job, the truth."""
        self.document, self.body, self.retry_after = answer.document, answer.body, answer.retry_after

    def offer(self, pushed: Update) -> bool:
        """A pushed update: taken when it is this job's and newer than what was seen (by revision)."""
        if (
            pushed.document.job_id != self.document.job_id
            or pushed.document.revision <= self.document.revision
        ):
            return False
        self.document, self.body = pushed.document, pushed.body
        return True


class Display(Protocol):
    """Where a wait shows the job: the --wait progress line, `watch`'s printed updates, nothing."""

    def update(self, document: StatusDocument, body: JsonObject) -> None:
        """Show a fresh status document."""

    def tick(self) -> None:
        """Time passed with nothing new."""

    def pause(self, seconds: float) -> None:
        """Sleep at least `seconds` (ticking)."""


class Quiet:
    """A display that shows nothing (the Python client's wait)."""

    def update(self, document: StatusDocument, body: JsonObject) -> None:
        """Nothing to show."""

    def tick(self) -> None:
        """Nothing to redraw."""

    def pause(self, seconds: float) -> None:
        """Sleep."""
        time.sleep(seconds)


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


@dataclass(frozen=True)
class Follower:
    """Follows jobs through one API; `notify` hears what a person would want to know (a retry, a
    fallback to polling)."""

    api: HttpApi
    notify: Callable[[str], None] = lambda _message: None

    def read(self, followed: Followed, deadline: float | None) -> None:
        """GET the job (retried as the policy allows) into `followed`."""
        job_id = followed.document.job_id
        answer = with_retries(
            lambda: self.api.get_job(job_id), "the status request", notify=self.notify, deadline=deadline
        )
        followed.read(answer)

    def open_live(self) -> LiveUpdates | None:
        """Live updates when the API offers them; None (said to `notify`) when they cannot be had."""
        try:
            return open_live(self.api)
        except LiveUpdatesError as error:
            self.notify(f"live updates unavailable ({error}): polling")
            return None

    def until_ended(self, followed: Followed, deadline: float | None, display: Display) -> None:
        """Follow the job until it ends (TimeUpError when `deadline` passes first)."""
        display.update(followed.document, followed.body)
        if followed.terminal:
            return
        live = self.open_live()
        if live is not None:
            with live:
                if self.follow_socket(followed, live, deadline, display):
                    return
        self.poll_until_ended(followed, deadline, display)

    def follow_socket(
        self, followed: Followed, live: LiveUpdates, deadline: float | None, display: Display
    ) -> bool:
        """Follow pushed updates until the job ends; False when the socket failed (the caller polls)."""
        # Read once the socket is open: a change made before it opened cannot be missed.
        self._refresh(followed, deadline, display)
        quiet_since = time.monotonic()
        while not followed.terminal:
            left = _left(deadline)
            if left is not None and left <= 0:
                raise TimeUpError
            if live.due_for_renewal:
                self.notify("the live connection is near its 2-hour limit: polling instead")
                return False
            # Short slices: the display ticks, and a quiet socket is checked with a GET now and then.
            wait = 1.0 if left is None else min(1.0, left)
            try:
                pushed = live.next_update(wait)
            except LiveUpdatesError as error:
                self.notify(f"live updates stopped ({error}): polling instead")
                return False
            if pushed is not None and followed.offer(pushed):
                quiet_since = time.monotonic()
                display.update(followed.document, followed.body)
            elif time.monotonic() - quiet_since >= LIVE_RECHECK_SECONDS:
                # A missed push costs only this much latency: the persisted job is the truth.
                self._refresh(followed, deadline, display)
                quiet_since = time.monotonic()
            else:
                display.tick()
        # Ended, as pushed: what a wait reports is the job as stored.
        self._refresh(followed, deadline, display)
        return True

    def poll_until_ended(self, followed: Followed, deadline: float | None, display: Display) -> None:
        """Poll until the job ends, sleeping the Retry-After the API asked for."""
        while not followed.terminal:
            delay: float = followed.retry_after or FALLBACK_POLL_SECONDS
            left = _left(deadline)
            if left is not None:
                if left <= 0:
                    raise TimeUpError
                # One last, early poll when the time is up: the job may have ended meanwhile.
                delay = min(delay, left)
            display.pause(delay)
            self._refresh(followed, deadline, display)

    def _refresh(self, followed: Followed, deadline: float | None, display: Display) -> None:
        self.read(followed, deadline)
        display.update(followed.document, followed.body)
