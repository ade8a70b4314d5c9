"""The sweeper with in-memory ports: one failing shard or job never holds up the rest."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pytest

from functions.sweeper.dependencies import SweeperDependencies
from functions.sweeper.service import SweepIncompleteError, sweep
from functions.sweeper.settings import SweeperSettings
from shared import resources as r
from shared.adapters.dynamo_items import sweep_shard
from shared.errors import StorageUnavailableError
from shared.fairness import message_group
from shared.job import BlobLocation, JobInput, JobRecord
from shared.lifecycle import JobStatus
from shared.ports import JobMessage, Lane, Lease
from tests.budget_fakes import InMemoryBudgetLedger
from tests.document_fakes import InMemoryDocumentRepository
from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore, job_record
from tests.slot_fakes import InMemorySlotStore

GRACE = timedelta(seconds=900)


class RecordingQueue:
    """The jobs queue in memory: the sweeper only ever sends single messages."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, message: JobMessage, delay_seconds: int = 0) -> None:
        # As SqsJobQueue: every job message goes out in its tenant's group.
        assert message.group == message_group("user:alice"), "sent in its tenant's MessageGroupId"
        self.sent.append(message.job_id)

    def send_batch(self, messages: list[JobMessage]) -> list[JobMessage]:
        raise AssertionError("the sweeper sends one message per recovered job")

    def send_to_dlq(self, body: str, reason: str, job_id: str | None) -> None:
        raise AssertionError("the sweeper never parks messages")


class FlakyRepository(InMemoryJobRepository):
    """Reads of some jobs, or of some shards, fail the way a throttled table does."""

    def __init__(self) -> None:
        super().__init__()
        self.failing_jobs: set[str] = set()
        self.failing_shards: set[str] = set()

    def get_job(self, job_id: str) -> JobRecord | None:
        if job_id in self.failing_jobs:
            raise StorageUnavailableError("throttled")
        return super().get_job(job_id)

    def sweep_candidates(self, shard: str, due_by: datetime, limit: int) -> list[str]:
        if shard in self.failing_shards:
            raise StorageUnavailableError("throttled")
        return super().sweep_candidates(shard, due_by, limit)


@pytest.fixture
def flaky() -> FlakyRepository:
    return FlakyRepository()


@pytest.fixture
def queue() -> RecordingQueue:
    return RecordingQueue()


@pytest.fixture
def deps(flaky: FlakyRepository, queue: RecordingQueue, clock: FakeClock) -> SweeperDependencies:
    settings = SweeperSettings.model_validate(
        {
            r.ENV_JOBS_TABLE: "jobs",
            r.ENV_PAYLOAD_BUCKET: "payloads",
            r.ENV_JOBS_QUEUE_URL: "https://q",
            r.ENV_ISOLATION_QUEUE_URL: "https://isolation",
            r.ENV_BUDGETS_TABLE: "budgets",
            r.ENV_DOCUMENTS_TABLE: "documents",
            r.ENV_SLOTS_TABLE: "slots",
        }
    )
    return SweeperDependencies(
        settings=settings,
        repository=flaky,
        payloads=InMemoryPayloadStore(),
        queues={Lane.SHARED: queue, Lane.ISOLATION: RecordingQueue()},
        clock=clock,
        budgets=InMemoryBudgetLedger(),
        documents=InMemoryDocumentRepository(),
        slots=InMemorySlotStore(),
    )


def _lost_jobs(repository: InMemoryJobRepository, clock: FakeClock, count: int) -> list[str]:
    """Pending jobs whose message never came (a relay failure), past their dispatch grace."""
    ids = []
    for _ in range(count):
        job = job_record(clock.now())
        repository.create_job(job, job.dispatch_at + GRACE)
        ids.append(job.job_id)
    clock.advance(GRACE + timedelta(seconds=1))
    return ids


def test_a_job_that_cannot_be_read_does_not_stop_the_others(
    deps: SweeperDependencies, flaky: FlakyRepository, queue: RecordingQueue, clock: FakeClock
) -> None:
    # Given lost jobs, one of which the table refuses to read
    lost = _lost_jobs(flaky, clock, 6)
    flaky.failing_jobs.add(lost[0])

    # When the sweeper runs, Then every other job is re-sent, and the run still ends in an error
    with pytest.raises(SweepIncompleteError):
        sweep(deps)
    assert sorted(queue.sent) == sorted(lost[1:])


def test_a_shard_that_cannot_be_read_does_not_stop_the_others(
    deps: SweeperDependencies, flaky: FlakyRepository, queue: RecordingQueue, clock: FakeClock
) -> None:
    lost = _lost_jobs(flaky, clock, 12)
    broken = sweep_shard(lost[0])
    flaky.failing_shards.add(broken)

    with pytest.raises(SweepIncompleteError):
        sweep(deps)
    assert sorted(queue.sent) == sorted(j for j in lost if sweep_shard(j) != broken)


def test_a_clean_sweep_reports_its_recoveries(
    deps: SweeperDependencies, flaky: FlakyRepository, queue: RecordingQueue, clock: FakeClock
) -> None:
    lost = _lost_jobs(flaky, clock, 3)

    report = sweep(deps)

    assert (report.redispatched, report.errors, sorted(report.job_ids)) == (3, 0, sorted(lost))
    assert sorted(queue.sent) == sorted(lost)


# --- crash isolation (DESIGN.md, "Lifecycle") -----------------------------------------------------


@pytest.fixture
def isolation(deps: SweeperDependencies) -> RecordingQueue:
    queue = deps.queues[Lane.ISOLATION]
    assert isinstance(queue, RecordingQueue)
    return queue


def _expired(repository: InMemoryJobRepository, clock: FakeClock, **fields: Any) -> JobRecord:
    """A Running job whose holder stopped heartbeating a second ago."""
    job = job_record(
        clock.now(),
        status=JobStatus.RUNNING,
        lease_token="dead-holder",
        lease_expires_at=clock.now() - timedelta(seconds=1),
        **{"attempts": 1, **fields},
    )
    repository.create_job(job, clock.now() - timedelta(seconds=1))
    return job


def test_a_lease_lost_with_a_batch_isolates_the_job_at_no_cost(
    deps: SweeperDependencies,
    flaky: FlakyRepository,
    queue: RecordingQueue,
    isolation: RecordingQueue,
    clock: FakeClock,
) -> None:
    # Given a job whose invocation also ran other jobs, and died
    job = _expired(flaky, clock, solo=False)

    # When the sweeper finds its lease expired
    report = sweep(deps)

    # Then it goes back to Pending, isolated, its claim given back, sent to the isolation queue
    swept = flaky.jobs[job.job_id]
    assert (swept.status, swept.isolated, swept.stalls, swept.crashes) == (JobStatus.PENDING, True, 0, 0)
    assert (isolation.sent, queue.sent) == ([job.job_id], [])
    assert (report.expired_leases, report.isolated) == (1, 1)


def test_a_lapsed_batch_hold_counts_no_crash(
    deps: SweeperDependencies, flaky: FlakyRepository, queue: RecordingQueue, clock: FakeClock
) -> None:
    job = _expired(flaky, clock, solo=True, waiting_for="provider_batch")

    sweep(deps)

    swept = flaky.jobs[job.job_id]
    assert (swept.status, swept.isolated, swept.stalls, swept.crashes) == (JobStatus.PENDING, False, 0, 0)
    assert swept.waiting_for is None
    assert queue.sent == [job.job_id]


def test_a_lease_lost_alone_counts_a_crash_and_keeps_the_job_apart(
    deps: SweeperDependencies, flaky: FlakyRepository, isolation: RecordingQueue, clock: FakeClock
) -> None:
    job = _expired(flaky, clock, solo=True)

    sweep(deps)

    swept = flaky.jobs[job.job_id]
    assert (swept.status, swept.isolated, swept.stalls, swept.crashes) == (JobStatus.PENDING, True, 1, 1)
    assert isolation.sent == [job.job_id]


def test_an_expired_claims_running_slot_is_released_by_its_own_token(
    deps: SweeperDependencies, flaky: FlakyRepository, clock: FakeClock
) -> None:
    # Given a capped job whose holder died holding slot 1 of its tenant, and slot 0 held by a live claim
    slots = deps.slots
    assert isinstance(slots, InMemorySlotStore)
    group = message_group("user:alice")
    dead = Lease("dead-holder", clock.now() - timedelta(seconds=1))
    live = Lease("live-holder", clock.now() + timedelta(seconds=60))
    assert slots.take(group, 1, dead, dead.expires_at - timedelta(seconds=60))
    assert slots.take(group, 0, live, clock.now())
    job = _expired(flaky, clock, solo=False, max_running=2, slot=1)

    # When the sweeper expires its lease
    sweep(deps)

    # Then the dead claim's slot is free, and the live one's is not touched
    assert flaky.jobs[job.job_id].status is JobStatus.PENDING
    assert slots.held == {(group, 0): live}


def test_the_last_crash_alone_fails_the_job_as_worker_crashed(
    deps: SweeperDependencies, flaky: FlakyRepository, isolation: RecordingQueue, clock: FakeClock
) -> None:
    # Given a job that already crashed a worker alone once (maxCrashes 2)
    job = _expired(flaky, clock, solo=True, crashes=1, isolated=True, attempts=2)

    # When its second solo lease expires
    sweep(deps)

    # Then it fails with worker_crashed, its input expiring a retention from now, nothing re-sent
    swept = flaky.jobs[job.job_id]
    assert (swept.status, swept.error and swept.error.code, swept.crashes) == (
        JobStatus.FAILED,
        "worker_crashed",
        2,
    )
    assert isolation.sent == []
    assert job.job_id not in flaky.sweep_at


class InputExpiryFails(InMemoryPayloadStore):
    def set_input_expiry(self, job_id: str, location: BlobLocation, at: datetime) -> None:
        raise StorageUnavailableError("throttled")


def test_a_failed_input_expiry_leaves_the_job_unfinished_for_the_next_sweep(
    deps: SweeperDependencies, flaky: FlakyRepository, clock: FakeClock
) -> None:
    # Given a job out of attempts, and an input expiry update that fails
    job = job_record(clock.now(), attempts=3, max_attempts=3)
    flaky.create_job(job, clock.now())
    payloads = InputExpiryFails()
    deps = dataclasses.replace(deps, payloads=payloads)

    # When the sweeper tries to fail it
    with pytest.raises(SweepIncompleteError):
        sweep(deps)

    # Then the job is not terminal (the input would then outlive its retention): it stays watched
    assert flaky.jobs[job.job_id].status is JobStatus.PENDING
    assert job.job_id in flaky.sweep_at

    # And the next sweep, with storage back, finishes it and sets the input's expiry
    recovered = InMemoryPayloadStore()
    recovered.put_input(JobInput(job_id=job.job_id, text="t"), "item", job.expires_at)
    sweep(dataclasses.replace(deps, payloads=recovered))
    assert flaky.jobs[job.job_id].status is JobStatus.FAILED
    assert recovered.expires_at[("input", job.job_id, "item")] == clock.now() + timedelta(hours=24)


def test_an_old_job_sent_again_renews_its_input(
    deps: SweeperDependencies, flaky: FlakyRepository, queue: RecordingQueue, clock: FakeClock
) -> None:
    # Given a job still Pending half a retention after its submit (its message got lost)
    job = job_record(clock.now())
    flaky.create_job(job, job.dispatch_at + GRACE)
    deps.payloads.put_input(JobInput(job_id=job.job_id, text="t"), "item", clock.now() + timedelta(hours=24))
    clock.advance(hours=13)

    # When the sweeper re-sends it
    sweep(deps)

    # Then its input lives a retention from now, so it cannot expire before the job runs
    assert queue.sent == [job.job_id]
    store = deps.payloads
    assert isinstance(store, InMemoryPayloadStore)
    assert store.expires_at[("input", job.job_id, "item")] == clock.now() + timedelta(hours=24)


def test_a_live_lease_is_looked_at_again_one_look_later(
    deps: SweeperDependencies, flaky: FlakyRepository, clock: FakeClock
) -> None:
    # Given a running job whose index entry came due while its holder still heartbeats
    job = job_record(
        clock.now(),
        status=JobStatus.RUNNING,
        lease_token="live",
        lease_expires_at=clock.now() + timedelta(seconds=40),
    )
    flaky.create_job(job, clock.now())

    # When the sweeper looks
    report = sweep(deps)

    # Then it defers the look by one look (a crash after that is still found within a look of
    # the lease's end), and touches nothing else
    assert flaky.sweep_at[job.job_id] == clock.now() + timedelta(seconds=deps.settings.sweep_look_seconds)
    assert flaky.jobs[job.job_id].status is JobStatus.RUNNING
    assert (report.deferred, report.recoveries) == (1, 0)


def test_a_job_backing_off_is_looked_at_again_when_its_dispatch_grace_ends(
    deps: SweeperDependencies, flaky: FlakyRepository, queue: RecordingQueue, clock: FakeClock
) -> None:
    # Given a job the worker handed back with backoff (its index entry, from the submit, is due)
    job = job_record(clock.now(), attempts=1, dispatch_at=clock.now() + timedelta(seconds=30))
    flaky.create_job(job, clock.now())

    sweep(deps)

    # Then nothing is re-sent (its own message brings it back); the look moves past its grace
    assert queue.sent == []
    assert flaky.sweep_at[job.job_id] == job.dispatch_at + GRACE
