"""The sweeper with in-memory ports: one failing shard or job never holds up the rest."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from functions.sweeper.dependencies import SweeperDependencies
from functions.sweeper.service import SweepIncompleteError, sweep
from functions.sweeper.settings import SweeperSettings
from shared import resources as r
from shared.adapters.dynamo_items import sweep_shard
from shared.errors import StorageUnavailableError
from shared.job import JobRecord
from shared.ports import JobMessage
from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore, job_record

GRACE = timedelta(seconds=900)


class RecordingQueue:
    """The jobs queue in memory: the sweeper only ever sends single messages."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, message: JobMessage, delay_seconds: int = 0) -> None:
        self.sent.append(message.job_id)

    def send_batch(self, messages: list[JobMessage]) -> list[JobMessage]:
        raise AssertionError("the sweeper sends one message per recovered job")

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        raise AssertionError("the sweeper holds no message")

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
        {r.ENV_JOBS_TABLE: "jobs", r.ENV_PAYLOAD_BUCKET: "payloads", r.ENV_JOBS_QUEUE_URL: "https://q"}
    )
    return SweeperDependencies(
        settings=settings, repository=flaky, payloads=InMemoryPayloadStore(), queue=queue, clock=clock
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
