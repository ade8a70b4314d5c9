"""The sweeper's budget repair with in-memory ports: what nothing settled is settled or released."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from functions.sweeper.dependencies import SweeperDependencies
from functions.sweeper.service import SweepIncompleteError, sweep
from functions.sweeper.settings import SweeperSettings
from shared import resources as r
from shared.budgets import (
    Reservation,
    ReservationRef,
    new_reservation,
    period_of,
    reservation_shard,
    settle_job,
)
from shared.errors import StorageUnavailableError
from shared.job import JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.ports import JobMessage, Lane
from tests.budget_fakes import InMemoryBudgetLedger
from tests.document_fakes import InMemoryDocumentRepository
from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore, job_record
from tests.slot_fakes import InMemorySlotStore

GRACE = timedelta(seconds=900)
CLAIM_TTL = timedelta(hours=24)


class NoQueue:
    """The sweeper sends nothing in these tests: no job here is lost or stuck."""

    def send(self, message: JobMessage, delay_seconds: int = 0) -> None:
        raise AssertionError(f"unexpected send of {message.job_id}")

    def send_batch(self, messages: list[JobMessage]) -> list[JobMessage]:
        raise AssertionError("unexpected batch")

    def send_to_dlq(self, body: str, reason: str, job_id: str | None) -> None:
        raise AssertionError("unexpected DLQ send")


@pytest.fixture
def ledger() -> InMemoryBudgetLedger:
    return InMemoryBudgetLedger()


@pytest.fixture
def deps(
    repository: InMemoryJobRepository, clock: FakeClock, ledger: InMemoryBudgetLedger
) -> SweeperDependencies:
    return budget_sweeper(repository, clock, ledger)


def budget_sweeper(
    repository: InMemoryJobRepository, clock: FakeClock, ledger: InMemoryBudgetLedger
) -> SweeperDependencies:
    """The sweeper over these fakes, sending nothing (no job here is lost or stuck)."""
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
        repository=repository,
        payloads=InMemoryPayloadStore(),
        queues={Lane.SHARED: NoQueue(), Lane.ISOLATION: NoQueue()},
        clock=clock,
        budgets=ledger,
        documents=InMemoryDocumentRepository(),
        slots=InMemorySlotStore(),
    )


def reserve_first_run(
    ledger: InMemoryBudgetLedger, job: JobRecord, now: datetime, tokens: int = 5_000
) -> JobRecord:
    """The job's first run reserved at `now` (its claim lives a day); the job as it holds it."""
    reservation = new_reservation(
        job.tenant,
        ReservationRef(job.job_id, 0),
        tokens,
        now=now,
        period=period_of(now),
        held_until=now + CLAIM_TTL,
        grace=GRACE,
    )
    ledger.reserve(reservation, 1_000_000)
    return job.model_copy(update={"budget": reservation.hold})


def _store_ended(
    repository: InMemoryJobRepository, job: JobRecord, status: JobStatus, used: int
) -> JobRecord:
    ended = job.model_copy(update={"status": status, "usage": Usage(input_tokens=used, output_tokens=0)})
    repository.jobs[ended.job_id] = ended  # a terminal job: off the sweeper's job index
    return ended


def test_an_ended_run_whose_settlement_was_lost_is_settled(
    deps: SweeperDependencies,
    repository: InMemoryJobRepository,
    ledger: InMemoryBudgetLedger,
    clock: FakeClock,
) -> None:
    # Given jobs that ended (succeeded, failed, canceled) whose stream records never settled them
    ended = [
        _store_ended(
            repository, reserve_first_run(ledger, job_record(clock.now()), clock.now()), status, used
        )
        for status, used in ((JobStatus.SUCCEEDED, 900), (JobStatus.FAILED, 40), (JobStatus.CANCELED, 0))
    ]
    assert ledger.counter("user:alice", period_of(clock.now())).reserved == 15_000

    # When the sweeper runs once their reservations are due
    clock.advance(GRACE)
    report = sweep(deps)

    # Then each is settled with its job's usage; nothing is reserved any more
    assert report.budget_repairs == 3
    counter = ledger.counter("user:alice", period_of(ended[0].created_at))
    assert (counter.used, counter.reserved) == (940, 0)
    # ... and a late stream record of one of them then settles nothing
    assert settle_job(ledger, ended[0]) is False


def test_a_running_job_keeps_its_reservation_and_is_looked_at_later(
    deps: SweeperDependencies,
    repository: InMemoryJobRepository,
    ledger: InMemoryBudgetLedger,
    clock: FakeClock,
) -> None:
    job = reserve_first_run(ledger, job_record(clock.now(), status=JobStatus.RUNNING), clock.now())
    repository.jobs[job.job_id] = job

    clock.advance(GRACE)
    first = sweep(deps)
    again = sweep(deps)  # at once: it was deferred, so it is not due

    assert (first.budget_repairs, again.budget_repairs) == (0, 0)
    [reservation] = ledger.reservations.values()
    assert reservation.check_at == clock.now() + GRACE
    assert ledger.writes == ["reserve", "defer"]


def test_a_submit_that_crashed_after_reserving_is_released_once_its_claim_expired(
    deps: SweeperDependencies, ledger: InMemoryBudgetLedger, clock: FakeClock
) -> None:
    # Given a reservation whose submit crashed before writing the job (no retry came)
    reserve_first_run(ledger, job_record(clock.now()), clock.now())
    period = period_of(clock.now())

    # When the sweeper looks while its claim lives, it leaves it (a retry may still complete it)
    clock.advance(GRACE)
    assert sweep(deps).budget_repairs == 0
    assert ledger.counter("user:alice", period).reserved == 5_000

    # When it looks once the claim expired and a grace passed, it gives the tokens back
    clock.advance(CLAIM_TTL)
    assert sweep(deps).budget_repairs == 1
    assert ledger.counter("user:alice", period).reserved == 0
    assert ledger.reservations == {}


def test_what_the_notifier_settled_costs_the_sweeper_nothing(
    deps: SweeperDependencies,
    repository: InMemoryJobRepository,
    ledger: InMemoryBudgetLedger,
    clock: FakeClock,
) -> None:
    ended = _store_ended(
        repository, reserve_first_run(ledger, job_record(clock.now()), clock.now()), JobStatus.SUCCEEDED, 7
    )
    assert settle_job(ledger, ended)

    clock.advance(GRACE)
    report = sweep(deps)

    assert report.budget_repairs == 0
    assert ledger.writes == ["reserve", "settle"]


def test_a_failing_reservation_read_holds_up_nothing_else(
    repository: InMemoryJobRepository, clock: FakeClock, deps: SweeperDependencies
) -> None:
    class FlakyLedger(InMemoryBudgetLedger):
        def due(self, shard: str, due_by: datetime, limit: int) -> list[Reservation]:
            if shard == "0":
                raise StorageUnavailableError("throttled")
            return super().due(shard, due_by, limit)

    ledger = FlakyLedger()
    jobs = [
        _store_ended(
            repository,
            reserve_first_run(ledger, job_record(clock.now()), clock.now()),
            JobStatus.SUCCEEDED,
            1,
        )
        for _ in range(12)
    ]
    clock.advance(GRACE)

    with pytest.raises(SweepIncompleteError):
        sweep(
            SweeperDependencies(
                deps.settings,
                repository,
                deps.payloads,
                deps.queues,
                clock,
                ledger,
                InMemoryDocumentRepository(),
                deps.slots,
            )
        )

    # The reservations of shard 0 wait for the next sweep; every other one was settled
    left = {ref.job_id for ref in ledger.reservations}
    assert left == {job.job_id for job in jobs if reservation_shard(job.job_id) == "0"}
