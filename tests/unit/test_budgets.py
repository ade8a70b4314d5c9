"""The budget rules (shared.budgets) on the in-memory ledger: periods, limits, settlement, repair."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from shared.budgets import (
    BudgetState,
    RepairKind,
    ReservationRef,
    ReserveOutcome,
    budget_document,
    document,
    documents,
    effective_limit,
    exceeded_detail,
    new_reservation,
    period_end,
    period_of,
    repair_for,
    settle_job,
    settlement_for,
)
from shared.job import BudgetHold, JobRecord, Usage
from shared.lifecycle import JobStatus
from tests.budget_fakes import InMemoryBudgetLedger
from tests.fakes import job_record

NOW = datetime(2030, 1, 15, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=15)
TENANT = "acme"


def _job(status: JobStatus = JobStatus.PENDING, **overrides: Any) -> JobRecord:
    return job_record(NOW, tenant=TENANT, owner="alice", status=status, **overrides)


def _reserve(
    ledger: InMemoryBudgetLedger, job: JobRecord, tokens: int, *, run: int = 0, base: int = 0
) -> BudgetHold:
    reservation = new_reservation(
        TENANT,
        ReservationRef(job.job_id, run),
        tokens,
        now=NOW,
        period=period_of(NOW),
        held_until=NOW + timedelta(hours=24),
        grace=GRACE,
        base_tokens=base,
    )
    assert ledger.reserve(reservation, limit=1_000_000).outcome is ReserveOutcome.RESERVED
    return reservation.hold


# --- periods and limits -----------------------------------------------------------------------


def test_a_period_is_the_calendar_month_in_utc() -> None:
    # 00:30 on 1 February in UTC+2 is still January in UTC
    assert period_of(datetime(2030, 2, 1, 0, 30, tzinfo=timezone(timedelta(hours=2)))) == "2030-01"
    assert period_end("2030-01") == datetime(2030, 2, 1, tzinfo=UTC)
    assert period_end("2030-12") == datetime(2031, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("configured", "stage_default", "limit"),
    [(None, 0, None), (None, 5_000, 5_000), (700, 5_000, 700), (0, 5_000, None), (700, 0, 700)],
    ids=["no-default", "stage-default", "own-limit-wins", "own-unlimited-wins", "own-limit-no-default"],
)
def test_the_tenants_own_limit_overrides_the_stage_default(
    configured: int | None, stage_default: int, limit: int | None
) -> None:
    assert effective_limit(configured, stage_default) == limit


def test_the_refusal_says_what_is_left_and_when_it_resets() -> None:
    detail = exceeded_detail(limit=10_000, committed=9_000, tokens=4_500, period="2030-01")

    assert "4,500 tokens" in detail
    assert "1,000 of the tenant's 10,000" in detail
    assert "2030-02-01T00:00:00.000Z" in detail


def test_the_budget_document_counts_what_is_left() -> None:
    state = BudgetState(TENANT, "2030-01", configured_limit=None, used=300, reserved=200)

    limited = budget_document(state, stage_default=1_000)
    assert (limited.limit_tokens, limited.used_tokens, limited.reserved_tokens, limited.remaining_tokens) == (
        1_000,
        300,
        200,
        500,
    )
    assert limited.resets_at == datetime(2030, 2, 1, tzinfo=UTC)
    unlimited = budget_document(state, stage_default=0)
    assert (unlimited.limit_tokens, unlimited.remaining_tokens) == (None, None)
    over = budget_document(BudgetState(TENANT, "2030-01", 400, used=500), stage_default=0)
    assert over.remaining_tokens == 0  # a run that overran its reservation: never negative


# --- reservations -----------------------------------------------------------------------------


def test_a_reservation_fits_exactly_the_limit_and_not_one_token_more() -> None:
    ledger = InMemoryBudgetLedger()
    fits, over = _job(), _job()

    first = new_reservation(
        TENANT, ReservationRef(fits.job_id, 0), 600, now=NOW, period="2030-01", held_until=NOW, grace=GRACE
    )
    second = new_reservation(
        TENANT, ReservationRef(over.job_id, 0), 401, now=NOW, period="2030-01", held_until=NOW, grace=GRACE
    )
    assert ledger.reserve(first, limit=1_000).outcome is ReserveOutcome.RESERVED
    refused = ledger.reserve(second, limit=1_000)
    assert (refused.outcome, refused.committed) == (ReserveOutcome.EXCEEDED, 600)
    assert ledger.reserve(first, limit=1_000).outcome is ReserveOutcome.ALREADY_RESERVED
    assert ledger.counter(TENANT, "2030-01").reserved == 600


# --- settlement -------------------------------------------------------------------------------


def test_nothing_to_settle_before_the_end_or_without_a_hold() -> None:
    hold = BudgetHold(period="2030-01", tokens=500)

    assert settlement_for(_job(JobStatus.RUNNING, budget=hold)) is None
    assert settlement_for(_job(JobStatus.SUCCEEDED)) is None


def test_a_run_settles_its_usage_less_what_earlier_runs_settled() -> None:
    job = _job(
        JobStatus.FAILED,
        usage=Usage(input_tokens=900, output_tokens=100),
        budget=BudgetHold(period="2029-12", tokens=5_000, base_tokens=700, run=2),
    )

    settlement = settlement_for(job)

    assert settlement is not None
    assert settlement.ref == ReservationRef(job.job_id, 2)
    assert (settlement.period, settlement.reserved_tokens, settlement.used_tokens) == ("2029-12", 5_000, 300)


def test_settling_twice_counts_once() -> None:
    # Given a job that reserved 500 and ended having used 120
    ledger = InMemoryBudgetLedger()
    job = _job()
    hold = _reserve(ledger, job, 500)
    ended = job.model_copy(
        update={
            "status": JobStatus.SUCCEEDED,
            "budget": hold,
            "usage": Usage(input_tokens=100, output_tokens=20),
        }
    )

    # When it is settled three times (duplicate stream records, a retry, the sweeper)
    outcomes = [settle_job(ledger, ended) for _ in range(3)]

    # Then only the first settled, and the counter moved once
    assert outcomes == [True, False, False]
    counter = ledger.counter(TENANT, hold.period)
    assert (counter.used, counter.reserved) == (120, 0)


# --- repair -----------------------------------------------------------------------------------


def test_a_running_run_is_looked_at_again_a_grace_later() -> None:
    ledger = InMemoryBudgetLedger()
    job = _job()
    hold = _reserve(ledger, job, 500)
    [reservation] = ledger.reservations.values()

    repair = repair_for(
        reservation, job.model_copy(update={"status": JobStatus.RUNNING, "budget": hold}), NOW, GRACE
    )

    assert (repair.kind, repair.until) == (RepairKind.DEFER, NOW + GRACE)


def test_an_ended_run_that_nothing_settled_is_settled_from_its_reservation() -> None:
    ledger = InMemoryBudgetLedger()
    job = _job()
    hold = _reserve(ledger, job, 500)
    [reservation] = ledger.reservations.values()
    ended = job.model_copy(
        update={
            "status": JobStatus.CANCELED,
            "budget": hold,
            "usage": Usage(input_tokens=40, output_tokens=2),
        }
    )

    repair = repair_for(reservation, ended, NOW, GRACE)

    assert repair.kind is RepairKind.SETTLE
    assert repair.settlement == settlement_for(ended)


def test_a_crashed_submits_reservation_waits_for_its_claim_then_goes() -> None:
    ledger = InMemoryBudgetLedger()
    job = _job()
    _reserve(ledger, job, 500)
    [reservation] = ledger.reservations.values()
    free_at = reservation.held_until + GRACE

    # While the claim lives, a retry may still complete the submit
    waiting = repair_for(reservation, None, NOW + GRACE, GRACE)
    assert (waiting.kind, waiting.until) == (RepairKind.DEFER, free_at)
    # After it (and a grace), nothing can come to hold it
    assert repair_for(reservation, None, free_at, GRACE).kind is RepairKind.RELEASE


def test_a_first_run_that_exists_without_holding_it_never_will() -> None:
    # A submit completed after its tenant's limit was removed: the job holds nothing
    ledger = InMemoryBudgetLedger()
    job = _job()
    _reserve(ledger, job, 500)
    [reservation] = ledger.reservations.values()

    assert repair_for(reservation, job, NOW + GRACE, GRACE).kind is RepairKind.RELEASE


def test_a_redrive_reservation_waits_for_its_redrive_then_goes() -> None:
    # An operator reserved run 1, but the redrive write has not happened (yet)
    ledger = InMemoryBudgetLedger()
    job = _job(JobStatus.FAILED)
    first = _reserve(ledger, job, 500)
    failed = job.model_copy(update={"budget": first})
    _reserve(ledger, job, 500, run=1)
    reservation = ledger.reservations[ReservationRef(job.job_id, 1)]

    assert repair_for(reservation, failed, NOW + GRACE, GRACE).kind is RepairKind.DEFER
    assert repair_for(reservation, failed, reservation.held_until + GRACE, GRACE).kind is RepairKind.RELEASE


def test_a_run_left_behind_by_a_later_run_is_released_not_counted_twice() -> None:
    ledger = InMemoryBudgetLedger()
    job = _job()
    _reserve(ledger, job, 500)
    reservation = ledger.reservations[ReservationRef(job.job_id, 0)]
    later = job.model_copy(
        update={"status": JobStatus.RUNNING, "budget": BudgetHold(period="2030-01", tokens=500, run=1)}
    )

    assert repair_for(reservation, later, NOW + GRACE, GRACE).kind is RepairKind.RELEASE


# --- status documents -------------------------------------------------------------------------


def test_reserved_tokens_show_until_the_run_is_settled() -> None:
    ledger = InMemoryBudgetLedger()
    running, ended, settled, free = _job(JobStatus.RUNNING), _job(), _job(), _job(JobStatus.SUCCEEDED)
    running = running.model_copy(update={"budget": _reserve(ledger, running, 300)})
    ended = ended.model_copy(update={"status": JobStatus.FAILED, "budget": _reserve(ledger, ended, 400)})
    settled = settled.model_copy(
        update={"status": JobStatus.SUCCEEDED, "budget": _reserve(ledger, settled, 500)}
    )
    assert settle_job(ledger, settled)

    shown = [d.reserved_tokens for d in documents(ledger, [running, ended, settled, free])]

    assert shown == [300, 400, None, None]
    assert ledger.reads.count("open_reservations") == 1  # one read for the whole page


def test_no_ledger_read_for_jobs_that_have_not_ended_or_hold_nothing() -> None:
    ledger = InMemoryBudgetLedger()
    running = _job(JobStatus.RUNNING)
    running = running.model_copy(update={"budget": _reserve(ledger, running, 300)})

    assert document(ledger, running).reserved_tokens == 300
    assert document(ledger, _job(JobStatus.CANCELED)).reserved_tokens is None
    assert ledger.reads == []
