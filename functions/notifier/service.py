"""The notifier use case: one batch of job writes, pushed to their owners' connections.

Decided from the records alone (their NEW_IMAGE): the table is never read. Per batch, each job's
highest revision is pushed once and older ones are dropped, so no connection gets an older
revision after a newer one from this batch. A post that fails is logged and counted, never
retried here (a push that arrives late is worth little; the client re-reads the job), and never
fails the batch; a connection that answers 410 is forgotten once past its handshake (a 410 while
$connect still runs means "not open yet", not "gone": shared.realtime.CONNECT_GRACE). What does
fail a record is reading the owner's connections, or enqueueing a terminal write's webhooks
(shared.webhooks.deliveries): Lambda retries it (bisected, bounded, then the failure queue).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from functions.notifier.dependencies import NotifierDependencies
from shared.errors import StorageUnavailableError
from shared.job import Caller
from shared.observability import logger, metrics
from shared.realtime import BatchPlan, Connection, JobChange, forget_when_gone, job_message
from shared.realtime_ports import PostOutcome


class BatchNotifier:
    """The state of one invocation: the batch's plan and the owners' connections read so far."""

    def __init__(self, deps: NotifierDependencies, records: Sequence[Mapping[str, Any]]) -> None:
        self._deps = deps
        self._changes: dict[str, JobChange | None] = {}
        for record in records:
            sequence = str((record.get("dynamodb") or {}).get("SequenceNumber", ""))
            self._changes[sequence] = self._read(record)
        self._plan = BatchPlan([c for c in self._changes.values() if c is not None])
        self._connections: dict[str, list[Connection]] = {}

    def _read(self, record: Mapping[str, Any]) -> JobChange | None:
        try:
            return self._deps.read_change(record)
        except ValueError:
            # Retrying cannot make it readable, and it would hold up the shard: skip it, loudly.
            logger.error("unreadable job record skipped")
            metrics.add_metric(name="UnreadableRecords", unit="Count", value=1)
            return None

    def push(self, record: Mapping[str, Any]) -> None:
        """Push one record's change to its owner's connections, unless a newer one in the batch wins."""
        sequence = str((record.get("dynamodb") or {}).get("SequenceNumber", ""))
        change = self._changes.get(sequence)
        if change is None:
            return
        # Every terminal write, whatever the push plan drops (a StorageUnavailableError fails the record).
        self._deps.webhooks.enqueue_deliveries(change)
        if not self._plan.should_push(change):
            metrics.add_metric(name="UpdatesDropped", unit="Count", value=1)
            return
        message = job_message(change.document)
        for connection in self._connections_of(change.owner):
            self._post(connection, message, change)

    def _connections_of(self, owner: Caller) -> list[Connection]:
        # A StorageUnavailableError here fails the record, and Lambda retries it.
        if owner.owner_key not in self._connections:
            self._connections[owner.owner_key] = self._deps.store.connections_of(owner)
        return self._connections[owner.owner_key]

    def _post(self, connection: Connection, message: str, change: JobChange) -> None:
        outcome = self._deps.gateway.post(connection.connection_id, message)
        if outcome is PostOutcome.SENT:
            metrics.add_metric(name="UpdatesPushed", unit="Count", value=1)
            return
        if outcome is PostOutcome.FAILED:
            logger.warning(
                "push failed", extra={"job_id": change.job_id, "connection_id": connection.connection_id}
            )
            metrics.add_metric(name="PushFailures", unit="Count", value=1)
            return
        # 410: the connection is gone ($disconnect never came, or it outlived 2 hours), or its
        # handshake is still under way: then it stays, so that the updates after this one reach it.
        if not forget_when_gone(connection, self._deps.clock.now()):
            metrics.add_metric(name="ConnectionsStillOpening", unit="Count", value=1)
            return
        self._connections[change.owner.owner_key] = [
            c
            for c in self._connections[change.owner.owner_key]
            if c.connection_id != connection.connection_id
        ]
        metrics.add_metric(name="ConnectionsGone", unit="Count", value=1)
        try:
            self._deps.store.remove_connection(change.owner, connection.connection_id)
        except StorageUnavailableError:
            # The next post finds it gone again and retries the delete; TTL ends it anyway.
            logger.warning("gone connection not removed", extra={"connection_id": connection.connection_id})
