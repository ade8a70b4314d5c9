"""The notifier's webhook step: which job writes enqueue what, for whom (fakes only)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from functions.notifier.dependencies import NotifierDependencies
from functions.notifier.service import BatchNotifier
from shared.adapters.job_stream import job_change
from shared.clock import SystemClock
from shared.errors import StorageUnavailableError
from shared.job import JobError, JobRecord
from shared.lifecycle import JobStatus
from shared.realtime import JobChange
from shared.webhooks.deliveries import DeliveryEnqueuer, deliveries_for, event_body
from shared.webhooks.endpoints import ALL_EVENTS, Endpoint, EndpointSecrets, new_endpoint_id
from shared.webhooks.events import EventType
from shared.webhooks.signing import generate_secret
from tests.budget_fakes import InMemoryBudgetLedger
from tests.document_fakes import InMemoryDocumentRepository
from tests.fakes import job_record
from tests.realtime_fakes import FakeGateway, InMemoryConnectionStore
from tests.support.events import job_stream_record as _record
from tests.webhook_fakes import InMemoryEndpointStore, RecordingDeliveryQueue

NOW = datetime(2030, 3, 17, 17, 46, 31, 870_000, tzinfo=UTC)


def _change(job: JobRecord, kind: str = "terminal") -> JobChange:
    change = job_change(_record(job, 1, kind))
    assert change is not None
    return change


def _ended(status: JobStatus, **overrides: Any) -> JobRecord:
    fields: dict[str, Any] = {"status": status, "updated_at": NOW + timedelta(seconds=9), "revision": 5}
    if status is JobStatus.FAILED:
        fields["error"] = JobError(code="retries_exhausted", message="The model kept failing.")
    return job_record(NOW, tenant="acme", owner="alice-sub", **{**fields, **overrides})


def _endpoint(
    tenant: str = "acme", events: tuple[EventType, ...] = ALL_EVENTS, *, enabled: bool = True
) -> Endpoint:
    return Endpoint(
        endpoint_id=new_endpoint_id(),
        tenant=tenant,
        url="https://hooks.example/outlast",
        events=events,
        created_at=NOW,
        enabled=enabled,
    )


@pytest.mark.parametrize(
    ("status", "event"),
    [
        (JobStatus.SUCCEEDED, EventType.JOB_SUCCEEDED),
        (JobStatus.FAILED, EventType.JOB_FAILED),
        (JobStatus.CANCELED, EventType.JOB_CANCELED),
    ],
)
def test_a_terminal_write_raises_its_event_for_each_endpoint_that_hears_it(
    status: JobStatus, event: EventType
) -> None:
    job = _ended(status, redrive_count=2)
    everything, only_this = _endpoint(), _endpoint(events=(event,))
    deaf = _endpoint(events=tuple(e for e in ALL_EVENTS if e is not event))

    messages = deliveries_for(_change(job), [everything, only_this, deaf])

    assert sorted(m.endpoint_id for m in messages) == sorted([everything.endpoint_id, only_this.endpoint_id])
    for message in messages:
        assert message.webhook_id == f"{job.job_id}.2.{event.value}"
        assert message.event_type is event
        assert message.job_id == job.job_id
        assert message.tenant == "acme"
        assert message.event_time == job.updated_at


def test_the_body_is_the_status_document_and_the_owner_never_the_text() -> None:
    job = _ended(JobStatus.SUCCEEDED)
    change = _change(job)

    body = json.loads(event_body(change, EventType.JOB_SUCCEEDED))

    assert list(body) == ["type", "timestamp", "data"]
    assert body["type"] == "job.succeeded"
    assert body["timestamp"] == "2030-03-17T17:46:40.870Z"
    owner = body["data"].pop("owner")
    assert owner == {"tenant": "acme", "sub": "alice-sub"}
    assert body["data"] == job.status_document().to_wire()
    assert "input" not in body["data"]
    assert "output" not in body["data"]


@pytest.mark.parametrize("kind", ["submit", "claim", "progress", "release", "cancel", "redrive", "bump"])
def test_writes_that_are_not_terminal_raise_nothing(kind: str) -> None:
    status = JobStatus.PENDING if kind in {"submit", "release", "redrive", "bump"} else JobStatus.RUNNING
    job = _ended(status)

    assert deliveries_for(_change(job, kind), [_endpoint()]) == []


def test_disabled_endpoints_and_other_tenants_get_nothing() -> None:
    job = _ended(JobStatus.SUCCEEDED)

    assert deliveries_for(_change(job), [_endpoint(enabled=False), _endpoint("globex")]) == []


def test_the_enqueuer_reads_endpoints_only_for_terminal_writes() -> None:
    store, queue = InMemoryEndpointStore(), RecordingDeliveryQueue()
    endpoint = _endpoint()
    store.add_endpoint(endpoint, EndpointSecrets(current=generate_secret()))
    enqueuer = DeliveryEnqueuer(store, queue)

    assert enqueuer.enqueue_deliveries(_change(_ended(JobStatus.RUNNING), "claim")) == 0
    assert store.reads_of_directory == 0
    assert enqueuer.enqueue_deliveries(_change(_ended(JobStatus.SUCCEEDED))) == 1

    assert store.reads_of_directory == 1
    assert [m.endpoint_id for m in queue.sent] == [endpoint.endpoint_id]


class TestTheNotifier:
    """The one call in the notifier: every terminal record enqueues, whatever the push plan drops."""

    def _notify(
        self, store: InMemoryEndpointStore, queue: RecordingDeliveryQueue, records: list[Any]
    ) -> None:
        deps = NotifierDependencies(
            store=InMemoryConnectionStore(),
            gateway=FakeGateway(),
            read_change=job_change,
            webhooks=DeliveryEnqueuer(store, queue),
            budgets=InMemoryBudgetLedger(),
            clock=SystemClock(),
            documents=InMemoryDocumentRepository(),
        )
        notifier = BatchNotifier(deps, records)
        for record in records:
            notifier.push(record)

    def test_duplicate_records_enqueue_again_with_the_same_webhook_id(self) -> None:
        store, queue = InMemoryEndpointStore(), RecordingDeliveryQueue()
        store.add_endpoint(_endpoint(), EndpointSecrets(current=generate_secret()))
        done = _ended(JobStatus.SUCCEEDED)

        self._notify(store, queue, [_record(done, 1, "terminal"), _record(done, 2, "terminal")])

        assert len(queue.sent) == 2
        assert queue.sent[0] == queue.sent[1]  # the sender and receivers deduplicate by webhook-id

    def test_a_terminal_write_followed_by_a_redrive_in_one_batch_still_enqueues(self) -> None:
        store, queue = InMemoryEndpointStore(), RecordingDeliveryQueue()
        store.add_endpoint(_endpoint(), EndpointSecrets(current=generate_secret()))
        failed = _ended(JobStatus.FAILED)
        redriven = failed.model_copy(update={"status": JobStatus.PENDING, "revision": 6, "redrive_count": 1})

        self._notify(store, queue, [_record(failed, 1, "terminal"), _record(redriven, 2, "redrive")])

        assert [m.webhook_id for m in queue.sent] == [f"{failed.job_id}.0.job.failed"]

    def test_a_queue_that_refuses_fails_the_record(self) -> None:
        store, queue = InMemoryEndpointStore(), RecordingDeliveryQueue(unavailable=True)
        store.add_endpoint(_endpoint(), EndpointSecrets(current=generate_secret()))

        with pytest.raises(StorageUnavailableError):
            self._notify(store, queue, [_record(_ended(JobStatus.CANCELED), 1, "terminal")])
