"""Streaming output: a view over persisted events (DESIGN.md, "Streaming output").

Pure domain code: the events, their cursor, the rules of a page of GET /v1/jobs/{id}/output, the
frames pushed to WebSocket followers, and the follow/unfollow messages. No AWS client here; the
stores are ports (`shared.output_ports`).

- An event is `{jobId, attempt, seq, text}`: `attempt` is the job's output attempt (each claim that
  streams takes the next one, never reused), `seq` counts from 1 within the attempt, without gaps.
  Events are ordered by (attempt, seq); a cursor names a position in that order.
- A reader shows, once the job has ended, the attempt its result holds (`resultAttempt`); before,
  the highest attempt it has seen. A newer attempt's text replaces an older one's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from shared.contract import OutputEventDocument, OutputPage
from shared.job import JobRecord

# A WebSocket connection follows at most this many jobs at once (DESIGN.md).
MAX_FOLLOWS_PER_CONNECTION = 20
# Page sizes of GET /v1/jobs/{id}/output.
DEFAULT_PAGE_EVENTS = 100
MAX_PAGE_EVENTS = 1000
# ATTEMPT.SEQ, each a non-negative integer below a billion: `0.0` is before every event.
CURSOR_PATTERN = r"^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})$"
_CURSOR = re.compile(CURSOR_PATTERN)


@dataclass(frozen=True, order=True)
class OutputCursor:
    """A position in a job's events: after (attempt, seq). Ordered as the events are."""

    attempt: int = 0
    seq: int = 0

    @classmethod
    def parse(cls, text: str) -> OutputCursor:
        """`ATTEMPT.SEQ` as sent in `after`; ValueError when it is not one."""
        found = _CURSOR.fullmatch(text)
        if found is None:
            raise ValueError("a cursor is ATTEMPT.SEQ")
        return cls(int(found.group(1)), int(found.group(2)))

    def __str__(self) -> str:
        return f"{self.attempt}.{self.seq}"


START = OutputCursor()


@dataclass(frozen=True)
class OutputEvent:
    """One flush of a streaming call: written once, never changed."""

    job_id: str
    attempt: int
    seq: int
    text: str

    @property
    def position(self) -> OutputCursor:
        """The cursor just at this event: reading `after` it gives the ones that follow."""
        return OutputCursor(self.attempt, self.seq)

    def document(self) -> OutputEventDocument:
        """The event as GET /v1/jobs/{id}/output answers it."""
        return OutputEventDocument(job_id=self.job_id, attempt=self.attempt, seq=self.seq, text=self.text)


def output_page(job: JobRecord, events: list[OutputEvent], limit: int, after: OutputCursor) -> OutputPage:
    """A page of the job's events after `after`, from at most `limit + 1` read (the extra one says
    whether more follow). Read the job first, then the events: a job that had ended when it was
    read has every event written by then (its last call flushed before its terminal write), so
    the page is complete when nothing is left beyond it."""
    shown = events[:limit]
    complete = job.is_terminal and len(events) <= limit
    position = shown[-1].position if shown else after
    return OutputPage(
        events=[event.document() for event in shown],
        next_cursor=None if complete else str(position),
        complete=complete,
        result_attempt=job.result_attempt,
    )


def output_message(event: OutputEvent) -> str:
    """The frame a follower receives: `{"type": "output", "jobId", "attempt", "seq", "text"}`."""
    return json.dumps(
        {
            "type": "output",
            "jobId": event.job_id,
            "attempt": event.attempt,
            "seq": event.seq,
            "text": event.text,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


# --- following a job over the WebSocket ----------------------------------------------------------


@dataclass(frozen=True)
class FollowRequest:
    """`{"action": "follow", "jobId", "after"?: {"attempt", "seq"}}` or `{"action": "unfollow", "jobId"}`."""

    action: str  # "follow" or "unfollow"
    job_id: str
    after: OutputCursor = START


class FollowRefused(Exception):  # noqa: N818 - an answer to the client, not a failure of ours
    """A follow or unfollow that is answered with an error frame; `code` is stable."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def frame(self) -> dict[str, Any]:
        """`{"type": "error", "code", "message"}`: the same for a missing job and another owner's."""
        return {"type": "error", "code": self.code, "message": self.message}


def job_not_found() -> FollowRefused:
    """One answer for a job that does not exist, has expired, or is someone else's: nothing else is said."""
    return FollowRefused("job_not_found", "No such job.")


_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1_000_000_000:
        raise FollowRefused("invalid_message", "after.attempt and after.seq are integers from 0.")
    return value


def parse_follow(body: str | None) -> FollowRequest:
    """The follow or unfollow message; FollowRefused(invalid_message) when it is not one."""
    try:
        message = json.loads(body or "")
    except (ValueError, RecursionError):
        message = None
    if not isinstance(message, dict) or message.get("action") not in {"follow", "unfollow"}:
        raise FollowRefused("invalid_message", 'Send {"action": "follow", "jobId": "...", "after"?: {...}}.')
    job_id = message.get("jobId")
    if not isinstance(job_id, str) or not _UUID.fullmatch(job_id):
        raise job_not_found()  # not a job id: no job can have it
    after = message.get("after")
    if after is None or message["action"] == "unfollow":
        return FollowRequest(action=message["action"], job_id=job_id.lower())
    if not isinstance(after, dict):
        raise FollowRefused("invalid_message", "after is {attempt, seq}.")
    cursor = OutputCursor(_count(after.get("attempt", 0)), _count(after.get("seq", 0)))
    return FollowRequest(action="follow", job_id=job_id.lower(), after=cursor)


def following_frame(job_id: str) -> dict[str, Any]:
    """The follow's answer, sent after the replay: live events follow from here."""
    return {"type": "following", "jobId": job_id}


def unfollowed_frame(job_id: str) -> dict[str, Any]:
    """The unfollow's answer."""
    return {"type": "unfollowed", "jobId": job_id}
