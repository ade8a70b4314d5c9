"""The output pusher: one batch of output events, posted to the connections that follow their jobs.

Decided from the records alone (their NEW_IMAGE is the event): the events table is never read.
Each job's followers are read once per batch, strongly consistent; a follow written after that
read is covered by its own replay, which reads the events after writing the follow. Every post is
safe to repeat: a client keeps each (attempt, seq) once. A post that fails is logged and counted,
never retried here (the client catches up from GET /v1/jobs/{id}/output or a new follow); a 410
forgets the follow once its connection is past its handshake. Only an unreadable follow list fails
a record (partial batch response; bisected, bounded retries, then the failure queue).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from functions.output_pusher.dependencies import OutputPusherDependencies
from shared.adapters.dynamodb_output import event_from_item
from shared.errors import StorageUnavailableError
from shared.observability import logger, metrics
from shared.output import OutputEvent, output_message
from shared.output_ports import Follow
from shared.realtime import Connection, forget_when_gone
from shared.realtime_ports import PostOutcome


def event_of(record: Mapping[str, Any]) -> OutputEvent | None:
    """The event an INSERT record carries (None: another kind of record); ValueError when unreadable."""
    if record.get("eventName") != "INSERT":
        return None
    image = (record.get("dynamodb") or {}).get("NewImage")
    try:
        return event_from_item(image or {})
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError("not an output event") from error


class BatchPusher:
    """The state of one invocation: the batch's events and the followers read so far."""

    def __init__(self, deps: OutputPusherDependencies, records: Sequence[Mapping[str, Any]]) -> None:
        self._deps = deps
        self._followers: dict[str, list[Follow]] = {}
        self._events: dict[str, OutputEvent | None] = {}
        for record in records:
            self._events[_sequence(record)] = self._read(record)

    @staticmethod
    def _read(record: Mapping[str, Any]) -> OutputEvent | None:
        try:
            return event_of(record)
        except ValueError:
            # Retrying cannot make it readable, and it would hold up the shard: skip it, loudly.
            logger.error("unreadable output event record skipped")
            metrics.add_metric(name="UnreadableRecords", unit="Count", value=1)
            return None

    def push(self, record: Mapping[str, Any]) -> None:
        """Post one record's event to every connection that follows its job."""
        event = self._events.get(_sequence(record))
        if event is None:
            return
        message = output_message(event)
        for follow in self._followers_of(event.job_id):
            self._post(follow, message)

    def _followers_of(self, job_id: str) -> list[Follow]:
        # A StorageUnavailableError here fails the record, and Lambda retries it.
        if job_id not in self._followers:
            self._followers[job_id] = self._deps.follows.followers(job_id)
        return self._followers[job_id]

    def _post(self, follow: Follow, message: str) -> None:
        outcome = self._deps.gateway.post(follow.connection_id, message)
        if outcome is PostOutcome.SENT:
            metrics.add_metric(name="OutputPushed", unit="Count", value=1)
            return
        if outcome is PostOutcome.FAILED:
            logger.warning(
                "output push failed", extra={"job_id": follow.job_id, "connection_id": follow.connection_id}
            )
            metrics.add_metric(name="OutputPushFailures", unit="Count", value=1)
            return
        connection = Connection(follow.connection_id, follow.owner, follow.connected_at)
        if not forget_when_gone(connection, self._deps.clock.now()):
            return  # still opening: later events reach it
        self._followers[follow.job_id] = [
            f for f in self._followers[follow.job_id] if f.connection_id != follow.connection_id
        ]
        try:
            self._deps.follows.forget_follower(follow.job_id, follow.connection_id)
        except StorageUnavailableError:
            # The next post finds it gone again and retries; TTL ends it anyway.
            logger.warning("gone follower not removed", extra={"connection_id": follow.connection_id})


def _sequence(record: Mapping[str, Any]) -> str:
    return str((record.get("dynamodb") or {}).get("SequenceNumber", ""))
