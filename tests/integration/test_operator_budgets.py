"""`outlast ops budgets set | show` and the reservation an operator redrive makes, against moto through a
stack's outputs (tests.integration.test_operator_dlq.World; the worker's moves are played by hand)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.budgets import (
    BudgetState,
    ReservationRef,
    late_usage_for,
    new_reservation,
    period_of,
    reservation_tokens,
    settle_job,
    settle_late,
)
from shared.contract import Operation
from shared.job import BudgetHold, JobInput, JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.plan_parameters import PlanParameters
from shared.planner import plan_job
from tests.integration.test_operator_dlq import EXHAUSTED, World, create_world
from tests.support import jobs

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

TENANT = "acme"  # the sample caller's tenant (tests.support.jobs)
STAGE_DEFAULT = 100_000
TEXT = "secret input text"
# What a redrive of one of World's jobs reserves (its input text, summarize, default plan).
RUN_BOUND = reservation_tokens(
    plan_job(TEXT, Operation.SUMMARIZE, PlanParameters(), prompt_version="summarize-v1")
)


@pytest.fixture
def world(moto_endpoint: str, resources: TestResources, capsys: pytest.CaptureFixture[str]) -> World:
    outputs = {"BudgetsTableName": resources.budgets_table, "DefaultMonthlyTokens": str(STAGE_DEFAULT)}
    return create_world(moto_endpoint, resources, capsys, outputs)


@pytest.fixture
def ledger(world: World) -> DynamoBudgetLedger:
    return DynamoBudgetLedger(world.dynamodb, world.resources.budgets_table)


def _now_period() -> str:
    return period_of(datetime.now(UTC))


def _failed_holding(world: World, ledger: DynamoBudgetLedger, *, used: int, settled: bool) -> JobRecord:
    """A job that reserved at submit (run 0) and failed having used `used` tokens."""
    at = jobs.now_millis()
    job = jobs.new_job(created_at=at)
    hold = BudgetHold(period=period_of(at), tokens=5_000)
    ledger.reserve(
        new_reservation(
            TENANT,
            ReservationRef(job.job_id, 0),
            5_000,
            now=at,
            period=hold.period,
            held_until=at + timedelta(hours=24),
            grace=timedelta(minutes=15),
        ),
        limit=10**9,
    )
    jobs.create(world.repository, job.model_copy(update={"budget": hold}))
    world.payloads.put_input(JobInput(job_id=job.job_id, text=TEXT), "item", job.expires_at)
    running = jobs.claim(world.repository, job.job_id, now=at)
    failed = jobs.fail(world.repository, running, EXHAUSTED, Usage(input_tokens=used, output_tokens=0))
    if settled:
        assert settle_job(ledger, failed)
    return failed


# --- budgets set | show ------------------------------------------------------------------------


def test_set_and_show_a_tenants_own_limit(world: World) -> None:
    # Given a tenant without a limit of its own: the stage default applies
    default = world.cli("budgets", "show", "--tenant", TENANT, "--json")
    assert default.code == 0, default.err
    [shown] = default.document["tenants"]
    assert (shown["limitTokens"], shown["ownLimitTokens"], shown["remainingTokens"]) == (
        STAGE_DEFAULT,
        None,
        STAGE_DEFAULT,
    )

    # When on-call gives it its own, then lifts it, then drops it again
    own = world.cli("budgets", "set", "--tenant", TENANT, "--monthly-tokens", "2,500,000", "--json")
    unlimited = world.cli("budgets", "set", "--tenant", TENANT, "--unlimited", "--json")
    dropped = world.cli("budgets", "set", "--tenant", TENANT, "--stage-default", "--json")

    # Then each is what the tenant's submits go by from then on
    assert (own.code, unlimited.code, dropped.code) == (0, 0, 0)
    assert (own.document["budget"]["limitTokens"], own.document["budget"]["ownLimitTokens"]) == (
        2_500_000,
        2_500_000,
    )
    assert (unlimited.document["budget"]["limitTokens"], unlimited.document["budget"]["ownLimitTokens"]) == (
        None,
        0,
    )
    assert (dropped.document["budget"]["limitTokens"], dropped.document["budget"]["ownLimitTokens"]) == (
        STAGE_DEFAULT,
        None,
    )


def test_show_without_a_tenant_lists_every_tenant_with_a_limit_or_a_counter(
    world: World, ledger: DynamoBudgetLedger
) -> None:
    world.cli("budgets", "set", "--tenant", "globex", "--monthly-tokens", "700")
    _failed_holding(world, ledger, used=10, settled=False)

    listed = world.cli("budgets", "show", "--json")
    human = world.cli("budgets", "show")

    assert listed.code == 0, listed.err
    rows = {row["tenant"]: row for row in listed.document["tenants"]}
    assert set(rows) == {TENANT, "globex"}
    assert (rows[TENANT]["reservedTokens"], rows["globex"]["limitTokens"]) == (5_000, 700)
    assert "TENANT" in human.out
    assert "globex" in human.out


def test_a_bad_limit_or_tenant_is_a_usage_error(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ("budgets", "set", "--tenant", TENANT, "--monthly-tokens", "0"),
        ("budgets", "set", "--tenant", "a#b", "--unlimited"),
        ("budgets", "set", "--tenant", TENANT),
    ):
        refused = world.cli(*argv)
        assert refused.code == 2, argv
        assert refused.err
    capsys.readouterr()


def test_a_stack_without_budgets_says_so(
    moto_endpoint: str, resources: TestResources, capsys: pytest.CaptureFixture[str]
) -> None:
    old = create_world(moto_endpoint, resources, capsys)

    run = old.cli("budgets", "show")

    assert run.code == 2
    assert "has no budgets table" in run.err


# --- redrives reserve again --------------------------------------------------------------------


def test_a_redrive_settles_the_ended_run_then_reserves_the_next(
    world: World, ledger: DynamoBudgetLedger
) -> None:
    # Given a Failed job whose run-0 settlement never came (its stream record was lost)
    failed = _failed_holding(world, ledger, used=1_200, settled=False)
    assert ledger.state(TENANT, _now_period()).reserved == 5_000

    # When on-call redrives it
    run = world.cli("jobs", "redrive", failed.job_id)

    # Then run 0 is settled with what it used, and run 1 reserves its own bound in this month,
    # counting from the usage run 0 settled
    assert run.code == 0, run.out
    state = ledger.state(TENANT, _now_period())
    assert state == BudgetState(TENANT, _now_period(), None, used=1_200, reserved=RUN_BOUND)
    job = world.job(failed.job_id)
    assert (job.status, job.redrive_count) == (JobStatus.PENDING, 1)
    assert job.budget == BudgetHold(period=_now_period(), tokens=RUN_BOUND, base_tokens=1_200, run=1)
    assert ledger.open_reservations([ReservationRef(job.job_id, 0), ReservationRef(job.job_id, 1)]) == {
        ReservationRef(job.job_id, 1)
    }


def test_a_redrive_after_late_usage_counts_it_once_and_reserves_from_the_runs_usage(
    world: World, ledger: DynamoBudgetLedger
) -> None:
    # Given a Failed job whose run-0 settlement never came, and a batch's late answer to it that
    # the poller counted (onto the job, then its budget) before on-call got to it
    failed = _failed_holding(world, ledger, used=1_200, settled=False)
    billed = Usage(input_tokens=10, output_tokens=3)
    counted = world.repository.count_late_usage(failed.job_id, "batch_1", billed)
    assert counted is not None
    assert counted.late_tokens == 13
    late = late_usage_for(counted, "batch_1", billed)
    assert late is not None
    assert settle_late(ledger, late)

    # When on-call redrives it
    run = world.cli("jobs", "redrive", failed.job_id)

    # Then run 0 settles what it used without the late tokens (already in), and run 1 counts
    # from run 0's usage alone
    assert run.code == 0, run.out
    state = ledger.state(TENANT, _now_period())
    assert state == BudgetState(TENANT, _now_period(), None, used=1_213, reserved=RUN_BOUND)
    job = world.job(failed.job_id)
    assert job.budget == BudgetHold(period=_now_period(), tokens=RUN_BOUND, base_tokens=1_200, run=1)
    assert job.usage is not None
    assert job.usage.input_tokens == 1_210  # the status document shows every token billed


def test_a_redrive_over_budget_is_refused_and_changes_nothing(
    world: World, ledger: DynamoBudgetLedger
) -> None:
    # Given a Failed job (settled) of a tenant with room for less than one more run
    failed = _failed_holding(world, ledger, used=300, settled=True)
    world.cli("budgets", "set", "--tenant", TENANT, "--monthly-tokens", str(300 + RUN_BOUND - 1))
    before = world.item(failed.job_id)

    # When on-call redrives it (by id, and from the DLQ)
    by_id = world.cli("jobs", "redrive", failed.job_id)
    world.to_dlq(failed)
    from_dlq = world.cli("dlq", "redrive", "--job-id", failed.job_id)

    # Then both are refused with what is left; the job, the queues and the budget are as they were
    assert by_id.code == 1
    assert "over budget" in by_id.out
    assert f"{RUN_BOUND - 1:,} of the tenant's" in by_id.out
    assert from_dlq.code == 1
    assert "over budget" in from_dlq.out
    assert world.item(failed.job_id) == before
    assert world.depth(world.queues.jobs_url) == (0, 0)
    assert ledger.state(TENANT, _now_period()).reserved == 0


def test_a_redrive_of_a_tenant_without_a_limit_holds_nothing(
    world: World, ledger: DynamoBudgetLedger
) -> None:
    failed = _failed_holding(world, ledger, used=40, settled=True)
    world.cli("budgets", "set", "--tenant", TENANT, "--unlimited")

    run = world.cli("jobs", "redrive", failed.job_id)

    assert run.code == 0, run.out
    assert world.job(failed.job_id).budget is None
    assert ledger.state(TENANT, _now_period()).reserved == 0
