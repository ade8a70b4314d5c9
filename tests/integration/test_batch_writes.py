"""The batch tier's adapters against the fakes that stand for them (DESIGN.md, "Cost tiers"): the
job writes (the hold, the batch recorded, the hand-back that ends the wait) on DynamoDB (moto) and
the in-memory repository alike; the open batches' table and its fake; and the Batch API adapter
through the real openai SDK against the local model server."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from openai import OpenAI

from outlast.local.model_server import ModelServer
from shared import resources as r
from shared.adapters.dynamodb_batches import DynamoOpenBatchStore
from shared.adapters.openai_batches import OpenAIBatchApi
from shared.batch_ports import BatchApi, OpenBatchStore
from shared.batches import BatchCall, BatchIntent, OpenBatch, OpenEntries, input_file
from shared.job import JobRecord, Usage, handed_back_marker, late_marker
from shared.lifecycle import JobStatus
from shared.ports import JobRepository, Lease, Transition, TransitionConflictError
from shared.tiers import Tier
from tests.batch_fakes import FakeBatchApi, InMemoryOpenBatchStore
from tests.fakes import InMemoryJobRepository
from tests.support import jobs
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration


@pytest.fixture(params=["dynamodb", "fake"])
def repository(request: pytest.FixtureRequest) -> JobRepository:
    if request.param == "fake":
        return InMemoryJobRepository()
    resources: TestResources = request.getfixturevalue("resources")
    return Storage(resources).repository()


def waiting(repository: JobRepository) -> tuple[str, Lease]:
    job = jobs.create(repository, jobs.new_job())
    jobs.claim(repository, job.job_id, token="hold")
    hold = Lease(token="hold", expires_at=jobs.now_millis() + timedelta(hours=25))
    held = repository.hold_for_batch(job.job_id, hold)
    assert held.waiting_for == "provider_batch"
    assert held.lease_expires_at == hold.expires_at
    return job.job_id, hold


def test_the_hold_drops_the_claims_running_slot(repository: JobRepository) -> None:
    """A job waiting on a batch holds no running slot: the claim that handed it over freed its own,
    and the item no longer names it (a later claim records the slot it takes)."""
    job = jobs.create(repository, jobs.new_job().model_copy(update={"max_running": 2}))
    at = jobs.now_millis()
    claimed = repository.transition(
        Transition(
            job_id=job.job_id,
            source=JobStatus.PENDING,
            target=JobStatus.RUNNING,
            now=at,
            new_lease=Lease(token="hold", expires_at=at + timedelta(minutes=5)),
            count_attempt=True,
            require_due=True,
            sweep_at=at + timedelta(minutes=5),
            slot=1,
        )
    )
    assert claimed.slot == 1

    held = repository.hold_for_batch(job.job_id, Lease(token="hold", expires_at=at + timedelta(hours=25)))

    assert held.slot is None
    read = repository.get_job(job.job_id)
    assert read is not None
    assert read.slot is None
    assert read.waiting_for == "provider_batch"


def test_the_hold_shows_the_wait_and_the_batch_is_recorded_under_it(repository: JobRepository) -> None:
    job_id, _ = waiting(repository)

    recorded = repository.record_batch(job_id, "hold", "batch_1")

    assert recorded.batch_id == "batch_1"
    read = repository.get_job(job_id)
    assert read is not None
    assert (read.status, read.waiting_for, read.batch_id) == (JobStatus.RUNNING, "provider_batch", "batch_1")
    assert read.status_document().waiting_for == "provider_batch"
    with pytest.raises(TransitionConflictError):
        repository.record_batch(job_id, "another-claim", "batch_2")


def hand_back(repository: JobRepository, job_id: str, **fields: Any) -> JobRecord:
    """The poller's hand-back under the hold "hold": Pending, due now, its attempt given back."""
    now = jobs.now_millis()
    return repository.transition(
        Transition(
            job_id=job_id,
            source=JobStatus.RUNNING,
            target=JobStatus.PENDING,
            now=now,
            lease_token="hold",
            dispatch_at=now,
            refund_attempt=True,
            **fields,
        )
    )


def test_a_hand_back_ends_the_wait_and_may_mark_the_fallback(repository: JobRepository) -> None:
    job_id, _ = waiting(repository)
    repository.record_batch(job_id, "hold", "batch_1")

    back = hand_back(
        repository,
        job_id,
        batch_fallback=True,
        # What the batch billed for an answer it could not keep.
        unkept_usage=Usage(input_tokens=10, output_tokens=3, tiers=frozenset({Tier.BATCH})),
    )

    read = repository.get_job(job_id)
    assert read is not None
    for job in (back, read):
        assert (job.status, job.waiting_for, job.batch_id) == (JobStatus.PENDING, None, None)
        assert job.batch_fallback
        assert (job.attempts, job.stalls) == (0, 0)
        assert job.usage is not None
        assert (job.usage.input_tokens, job.usage.output_tokens, job.usage.tiers) == (
            10,
            3,
            frozenset({Tier.BATCH}),
        )
        assert job.extra_usage is not None
        assert (job.extra_usage.input_tokens, job.extra_usage.output_tokens) == (10, 3)


def test_the_owners_list_shows_the_wait_as_the_status_document_does(repository: JobRepository) -> None:
    job_id, _ = waiting(repository)
    job = repository.get_job(job_id)
    assert job is not None

    page = repository.list_jobs(job.owner_key, None, 20, None, jobs.now_millis())

    [item] = [item for item in page.items if item.job_id == job_id]
    assert item.status_document().waiting_for == "provider_batch"  # GET /v1/jobs's items


def canceled_in_its_batch(repository: JobRepository) -> str:
    """A waiting job whose cancel the poller honoured: Canceled, under its hold."""
    job_id, _ = waiting(repository)
    now = jobs.now_millis()
    for source, target in (
        (JobStatus.RUNNING, JobStatus.CANCELLATION_REQUESTED),
        (JobStatus.CANCELLATION_REQUESTED, JobStatus.CANCELED),
    ):
        repository.transition(
            Transition(
                job_id=job_id,
                source=source,
                target=target,
                now=now,
                lease_token="hold" if target is JobStatus.CANCELED else None,
                cancel_requested_at=now,
            )
        )
    return job_id


BILLED = Usage(input_tokens=10, output_tokens=3, tiers=frozenset({Tier.BATCH}))


def test_late_usage_comes_onto_an_ended_job_once_per_batch(repository: JobRepository) -> None:
    job_id = canceled_in_its_batch(repository)

    counted = repository.count_late_usage(job_id, "batch_1", BILLED)
    again = repository.count_late_usage(job_id, "batch_1", BILLED)
    other = repository.count_late_usage(job_id, "batch_2", BILLED)

    assert counted is not None
    assert again is not None
    assert other is not None
    read = repository.get_job(job_id)
    assert read is not None
    assert read.usage is not None
    assert (read.usage.input_tokens, read.usage.output_tokens) == (20, 6)  # once per batch
    assert read.usage.tiers == frozenset({Tier.BATCH})
    # Kept apart in the same write: what runs' settlements leave out (settle_late counts it), and
    # the extra usage a redriven multi-step run's re-sum keeps.
    assert read.late_tokens == 26
    assert read.extra_usage == Usage(input_tokens=20, output_tokens=6)
    assert read.batches_seen == {late_marker("batch_1"), late_marker("batch_2")}
    assert read.status is JobStatus.CANCELED
    assert again.batches_seen >= {late_marker("batch_1")}  # counted before: the budget may be owed


def test_late_usage_is_refused_for_a_job_handed_back_or_not_ended(repository: JobRepository) -> None:
    job_id, _ = waiting(repository)
    assert repository.count_late_usage(job_id, "batch_1", BILLED) is None  # still waiting
    back = hand_back(repository, job_id, batch_seen="batch_1")
    assert back.batches_seen == {handed_back_marker("batch_1")}
    repository.transition(
        Transition(job_id=job_id, source=JobStatus.PENDING, target=JobStatus.CANCELED, now=jobs.now_millis())
    )

    assert repository.count_late_usage(job_id, "batch_1", BILLED) is None  # its answers were kept
    assert repository.count_late_usage("missing-job", "batch_1", BILLED) is None
    read = repository.get_job(job_id)
    assert read is not None
    assert read.usage is None
    assert (read.late_tokens, read.extra_usage) == (0, None)


def test_the_hold_is_refused_to_another_lease(repository: JobRepository) -> None:
    job = jobs.create(repository, jobs.new_job())
    jobs.claim(repository, job.job_id, token="claim")

    with pytest.raises(TransitionConflictError):
        repository.hold_for_batch(job.job_id, Lease(token="other", expires_at=jobs.now_millis()))


@pytest.fixture(params=["dynamodb", "fake"])
def store(request: pytest.FixtureRequest) -> Iterator[OpenBatchStore]:
    if request.param == "fake":
        yield InMemoryOpenBatchStore()
        return
    resources: TestResources = request.getfixturevalue("resources")
    dynamodb = Storage(resources).dynamodb
    table = f"batches-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": r.BATCHES_PARTITION_KEY, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": r.BATCHES_PARTITION_KEY, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    yield DynamoOpenBatchStore(dynamodb, table)
    dynamodb.delete_table(TableName=table)


def call(job_id: str, step: str = "s0") -> BatchCall:
    return BatchCall(
        job_id=job_id,
        hold="hold",
        step_id=step,
        attempt=1,
        final=True,
        model="gpt-4o-mini",
        body={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"Summarize {job_id}."}]},
    )


def test_an_open_batch_is_listed_until_it_is_deleted(store: OpenBatchStore) -> None:
    batch = OpenBatch(
        batch_id="batch_1",
        model="gpt-4o-mini",
        created_at=jobs.now_millis(),
        calls=(call("job-a").without_body(), call("job-b").without_body()),
    )

    store.put(batch)
    store.put(batch)  # a retried put is the same batch

    assert store.list_open(10) == OpenEntries(batches=(batch,))
    assert batch.job_ids == ["job-a", "job-b"]
    store.delete("batch_1")
    assert store.list_open(10) == OpenEntries()


def intent_and_batch() -> tuple[BatchIntent, OpenBatch]:
    """An intent of job-a's call, and the batch `batch_1` of the same call."""
    intent = BatchIntent(
        intent_id="0123abcd",
        model="gpt-4o-mini",
        created_at=jobs.now_millis(),
        calls=(call("job-a").without_body(),),
    )
    return intent, OpenBatch(
        batch_id="batch_1", model="gpt-4o-mini", created_at=intent.created_at, calls=intent.calls
    )


def test_an_intent_is_listed_apart_from_the_batches_until_it_is_deleted(store: OpenBatchStore) -> None:
    intent, batch = intent_and_batch()

    store.put_intent(intent)
    store.put(batch)

    assert store.list_open(10) == OpenEntries(batches=(batch,), intents=(intent,))
    store.delete_intent("0123abcd")
    assert store.list_open(10) == OpenEntries(batches=(batch,))


def test_an_orphan_is_recorded_only_when_no_batch_of_its_id_is(store: OpenBatchStore) -> None:
    intent, recorded = intent_and_batch()
    store.put(recorded)

    assert not store.put_orphan(intent.orphan("batch_1"))  # its batcher recorded it before dying
    assert store.put_orphan(intent.orphan("batch_2"))
    assert not store.put_orphan(intent.orphan("batch_2"))  # a repeated run writes it once

    listed = {batch.batch_id: batch.orphaned for batch in store.list_open(10).batches}
    assert listed == {"batch_1": False, "batch_2": True}


@pytest.fixture(params=["openai", "fake"])
def batch_api(request: pytest.FixtureRequest) -> Iterator[BatchApi]:
    if request.param == "fake":
        yield FakeBatchApi()
        return
    with ModelServer(batch_seconds=60) as server:
        yield OpenAIBatchApi(OpenAI(api_key="local", base_url=server.url, max_retries=0))


def test_batches_are_found_by_their_metadata_newest_first(batch_api: BatchApi) -> None:
    since = datetime.now(UTC) - timedelta(minutes=1)
    first = batch_api.create("gpt-4o-mini", input_file([call("job-a")]), {"outlast_intent": "a"})
    batch_api.create("gpt-4o-mini", input_file([call("job-b")]), {"outlast_intent": "b"})
    second = batch_api.create("gpt-4o-mini", input_file([call("job-c")]), {"outlast_intent": "a"})

    found = batch_api.find("outlast_intent", "a", since)

    assert [batch.batch_id for batch in found] == [second.batch_id, first.batch_id]
    assert batch_api.find("outlast_intent", "missing", since) == []
    assert batch_api.find("outlast_intent", "a", datetime.now(UTC) + timedelta(minutes=1)) == []


def test_the_batch_api_adapter_creates_retrieves_and_reads_a_batch_through_the_sdk() -> None:
    with ModelServer(batch_seconds=0.1) as server:
        api = OpenAIBatchApi(OpenAI(api_key="local", base_url=server.url, max_retries=0))
        calls = [call("job-a"), call("job-b")]

        created = api.create("gpt-4o-mini", input_file(calls), {"source": "outlast"})
        assert not created.ended
        assert [line["custom_id"] for line in api.lines(created.input_file_id)] == [
            c.custom_id for c in calls
        ]
        ended = created
        for _ in range(200):
            ended = api.retrieve(created.batch_id)
            if ended.ended:
                break
            time.sleep(0.05)

        assert ended.status == "completed"
        assert ended.output_file_id is not None
        answered = {line["custom_id"] for line in api.lines(ended.output_file_id)}
        assert answered == {c.custom_id for c in calls}


def test_the_batch_api_adapter_cancels_a_batch() -> None:
    with ModelServer(batch_seconds=60) as server:
        api = OpenAIBatchApi(OpenAI(api_key="local", base_url=server.url, max_retries=0))
        created = api.create("gpt-4o-mini", input_file([call("job-a")]), {})

        api.cancel(created.batch_id)

        assert api.retrieve(created.batch_id).status == "cancelled"
