"""Ports of streaming output: the events store and the follows of WebSocket connections.

Adapters: `shared.adapters.dynamodb_output` (events in their own table, whose stream feeds the
output pusher) and `shared.adapters.dynamodb_connections` (follows beside the connections).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from shared.job import Caller
from shared.output import OutputCursor, OutputEvent


class OutputEventStore(Protocol):
    """A streaming job's events, one item each, written once with a condition."""

    def put_event(self, event: OutputEvent, expires_at: datetime) -> None:
        """Write the event unless its (job, attempt, seq) exists: one write unit. A repeat of the
        same write (a retried request) is harmless: attempts are never shared between writers."""
        ...

    def events_after(self, job_id: str, after: OutputCursor, limit: int, now: datetime) -> list[OutputEvent]:
        """At most `limit` live events of the job after `after`, in (attempt, seq) order, read
        strongly consistent (an expired one is gone even before TTL deletes it)."""
        ...


@dataclass(frozen=True)
class Follow:
    """A connection that follows a job's output (kept as long as the connection may live)."""

    job_id: str
    connection_id: str
    owner: Caller
    connected_at: datetime


class TooManyFollowsError(Exception):
    """The connection already follows MAX_FOLLOWS_PER_CONNECTION jobs."""


class ConnectionClosedError(Exception):
    """The connection is not recorded (closed, or gone before its follow was written)."""


class FollowStore(Protocol):
    """Follows: written by the follow route, read by the output pusher, gone with the connection."""

    def add_follow(self, follow: Follow, limit: int) -> None:
        """Record the follow on the connection's own list (at most `limit` jobs:
        TooManyFollowsError; ConnectionClosedError when the connection is not recorded), then the
        follow itself, keyed by job. Following a job twice is one follow."""
        ...

    def remove_follow(self, owner: Caller, connection_id: str, job_id: str) -> None:
        """Forget one follow (the follow item, then the connection's list entry); a missing one is fine."""
        ...

    def followers(self, job_id: str) -> list[Follow]:
        """The connections that follow the job, read strongly consistent."""
        ...

    def forget_follower(self, job_id: str, connection_id: str) -> None:
        """Forget a follow whose connection is gone (the pusher's 410)."""
        ...
