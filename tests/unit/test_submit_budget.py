"""Submit step (3), the budget reservation, with in-memory ports (DESIGN.md, "Token budgets")."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from functions.submit.dependencies import SubmitDependencies
from functions.submit.service import SubmitOutcome, submit_job
from functions.submit.settings import SubmitSettings
from shared import resources as r
from shared.budgets import (
    Reservation,
    ReservationRef,
    ReserveResult,
    period_of,
    reservation_tokens,
    settle_job,
)
from shared.contract import Operation, SubmitRequest
from shared.errors import (
    BudgetExceededError,
    IdempotencyKeyReusedError,
    RateLimitedError,
    StorageUnavailableError,
)
from shared.job import BudgetHold, Caller, IdempotencyRecord, JobInput, JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.plan_parameters import PlanParameters
from shared.planner import plan_job
from shared.prompts import template_for
from tests.budget_fakes import InMemoryBudgetLedger
from tests.document_fakes import InMemoryDocumentObjects, InMemoryDocumentRepository
from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore

ALICE = Caller(tenant="acme", sub="alice")
BOB = Caller(tenant="acme", sub="bob")
OTHER_TENANT = Caller(tenant="globex", sub="carol")
# Long enough to live outside the job item (a small one rides in it), so a submit writes an input.
TEXT = "The quarterly report, at length. " * 36
SUMMARIZE: dict[str, Any] = {"operation": "summarize", "input": {"text": TEXT}}
# What one SUMMARIZE job reserves: its true upper bound, the default cap on its one call included.
BOUND = reservation_tokens(
    plan_job(
        TEXT, Operation.SUMMARIZE, PlanParameters(), prompt_version=template_for(Operation.SUMMARIZE).version
    )
)


def settings(**env: str) -> SubmitSettings:
    return SubmitSettings.model_validate(
        {
            r.ENV_JOBS_TABLE: "jobs",
            r.ENV_IDEMPOTENCY_TABLE: "idempotency",
            r.ENV_PAYLOAD_BUCKET: "payloads",
            r.ENV_BUDGETS_TABLE: "budgets",
            r.ENV_DOCUMENTS_TABLE: "documents",
            r.ENV_DOCUMENTS_BUCKET: "documents",
            "DEFAULT_MONTHLY_TOKENS": str(3 * BOUND),
            **env,
        }
    )


@pytest.fixture
def ledger() -> InMemoryBudgetLedger:
    return InMemoryBudgetLedger()


@pytest.fixture
def deps(
    repository: InMemoryJobRepository,
    payloads: InMemoryPayloadStore,
    clock: FakeClock,
    ledger: InMemoryBudgetLedger,
) -> SubmitDependencies:
    return SubmitDependencies(
        settings(),
        repository,
        payloads,
        clock,
        ledger,
        InMemoryDocumentRepository(),
        InMemoryDocumentObjects(),
    )


def submit(
    deps: SubmitDependencies, key: str = "key-1", caller: Caller = ALICE, body: dict[str, Any] = SUMMARIZE
) -> SubmitOutcome:
    return submit_job(deps, caller, SubmitRequest.model_validate(json.loads(json.dumps(body))), key)


def test_a_job_reserves_its_upper_bound_in_its_tenants_month(
    deps: SubmitDependencies, ledger: InMemoryBudgetLedger, clock: FakeClock
) -> None:
    job = submit(deps).job

    period = period_of(clock.now())
    assert job.budget == BudgetHold(period=period, tokens=BOUND)
    assert ledger.counter("acme", period).reserved == BOUND
    assert list(ledger.reservations) == [ReservationRef(job.job_id, 0)]
    assert job.status_document().reserved_tokens == BOUND
    # The bound covers the call's max_tokens, which is the default cap when the job set none
    assert BOUND > 4096


def test_the_submit_order_is_claim_rate_reserve_input_job(clock: FakeClock) -> None:
    order: list[str] = []

    class Repository(InMemoryJobRepository):
        def claim_idempotency_key(self, record: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
            order.append("claim")
            return super().claim_idempotency_key(record, now)

        def take_submit_quota(self, owner_key: str, window_start: datetime, limit: int) -> bool:
            order.append("rate")
            return super().take_submit_quota(owner_key, window_start, limit)

        def create_job(self, job: JobRecord, sweep_at: datetime) -> bool:
            order.append("job")
            return super().create_job(job, sweep_at)

    class Payloads(InMemoryPayloadStore):
        def put_input(self, job_input: JobInput, location: Any, expires_at: datetime) -> None:
            order.append("input")
            super().put_input(job_input, location, expires_at)

    class Ledger(InMemoryBudgetLedger):
        def reserve(self, reservation: Reservation, limit: int) -> ReserveResult:
            order.append("reserve")
            return super().reserve(reservation, limit)

    submit(
        SubmitDependencies(
            settings(),
            Repository(),
            Payloads(),
            clock,
            Ledger(),
            InMemoryDocumentRepository(),
            InMemoryDocumentObjects(),
        )
    )

    assert order == ["claim", "rate", "reserve", "input", "job"]


def test_over_the_limit_is_refused_and_leaves_nothing_behind(
    deps: SubmitDependencies,
    repository: InMemoryJobRepository,
    payloads: InMemoryPayloadStore,
    ledger: InMemoryBudgetLedger,
    clock: FakeClock,
) -> None:
    # Given a tenant whose budget fits three jobs, all reserved
    for n in range(3):
        submit(deps, key=f"fits-{n}", caller=ALICE if n % 2 else BOB)
    jobs_before, writes_before = dict(repository.jobs), list(ledger.writes)

    # When a fourth is submitted
    with pytest.raises(BudgetExceededError) as refused:
        submit(deps, key="over")

    # Then it is refused with what is left and when the period resets; no claim, input, job or
    # reservation of it remains
    assert f"{BOUND:,} tokens" in refused.value.detail
    assert f"0 of the tenant's {3 * BOUND:,}" in refused.value.detail
    assert "2030-02-01T00:00:00.000Z" in refused.value.detail
    assert repository.jobs == jobs_before
    assert len(repository.claims) == 3
    assert ledger.writes == writes_before
    assert len(payloads.inputs) == 3
    assert ledger.counter("acme", period_of(clock.now())).reserved == 3 * BOUND


def test_a_refused_submit_retried_once_budget_is_free_starts_fresh(
    deps: SubmitDependencies, ledger: InMemoryBudgetLedger
) -> None:
    deps_full = SubmitDependencies(
        settings(DEFAULT_MONTHLY_TOKENS=str(BOUND - 1)),
        deps.repository,
        deps.payloads,
        deps.clock,
        ledger,
        InMemoryDocumentRepository(),
        InMemoryDocumentObjects(),
    )
    with pytest.raises(BudgetExceededError):
        submit(deps_full, key="later")

    # When the limit is raised and the client retries with the same key
    accepted = submit(deps, key="later")

    assert accepted.replayed is False
    assert ledger.writes == ["reserve"]


def test_a_replay_never_reserves_twice(deps: SubmitDependencies, ledger: InMemoryBudgetLedger) -> None:
    first = submit(deps).job

    again = submit(deps)

    assert (again.replayed, again.job.job_id) == (True, first.job_id)
    assert ledger.writes == ["reserve"]
    assert ledger.reads == ["state"]  # the replay spends no budget read either


def test_a_reused_key_reserves_nothing(deps: SubmitDependencies, ledger: InMemoryBudgetLedger) -> None:
    submit(deps)

    with pytest.raises(IdempotencyKeyReusedError):
        submit(deps, body={"operation": "analyze", "input": {"text": "Something else."}})

    assert ledger.writes == ["reserve"]


def test_a_rate_limited_submit_reserves_nothing(
    repository: InMemoryJobRepository,
    payloads: InMemoryPayloadStore,
    clock: FakeClock,
    ledger: InMemoryBudgetLedger,
) -> None:
    deps = SubmitDependencies(
        settings(SUBMITS_PER_MINUTE="1"),
        repository,
        payloads,
        clock,
        ledger,
        InMemoryDocumentRepository(),
        InMemoryDocumentObjects(),
    )
    submit(deps, key="first")

    with pytest.raises(RateLimitedError):
        submit(deps, key="second")

    assert ledger.writes == ["reserve"]


def test_a_retry_after_a_crash_finds_its_reservation_made(
    clock: FakeClock, ledger: InMemoryBudgetLedger
) -> None:
    # Given a submit that reserved and then crashed before its input
    class InputFailsOnce(InMemoryPayloadStore):
        failures = 1

        def put_input(self, job_input: JobInput, location: Any, expires_at: datetime) -> None:
            if self.failures:
                self.failures -= 1
                raise StorageUnavailableError("Storage is busy; retry shortly.")
            super().put_input(job_input, location, expires_at)

    deps = SubmitDependencies(
        settings(),
        InMemoryJobRepository(),
        InputFailsOnce(),
        clock,
        ledger,
        InMemoryDocumentRepository(),
        InMemoryDocumentObjects(),
    )
    clock.set(datetime(2030, 1, 31, 23, 59, 58, tzinfo=UTC))
    with pytest.raises(StorageUnavailableError):
        submit(deps)
    assert ledger.writes == ["reserve"]

    # When the client retries, even in the next month
    clock.set(datetime(2030, 2, 1, 0, 0, 5, tzinfo=UTC))
    job = submit(deps).job

    # Then the job holds the one reservation, in the month it was made in
    assert ledger.writes == ["reserve"]
    assert job.budget == BudgetHold(period="2030-01", tokens=BOUND)
    assert ledger.counter("acme", "2030-01").reserved == BOUND
    assert ledger.counter("acme", "2030-02").reserved == 0


def test_a_retry_completing_a_crashed_submit_holds_the_stored_reservation_not_a_recomputed_one(
    clock: FakeClock, ledger: InMemoryBudgetLedger
) -> None:
    # Given a submit that reserved and crashed before its input, under code whose bound was other
    # than today's (a deploy between the crash and the retry changed how bounds are counted)
    class InputFailsOnce(InMemoryPayloadStore):
        failures = 1

        def put_input(self, job_input: JobInput, location: Any, expires_at: datetime) -> None:
            if self.failures:
                self.failures -= 1
                raise StorageUnavailableError("Storage is busy; retry shortly.")
            super().put_input(job_input, location, expires_at)

    deps = SubmitDependencies(
        settings(),
        InMemoryJobRepository(),
        InputFailsOnce(),
        clock,
        ledger,
        InMemoryDocumentRepository(),
        InMemoryDocumentObjects(),
    )
    with pytest.raises(StorageUnavailableError):
        submit(deps)
    [(ref, made)] = ledger.reservations.items()
    older_bound = BOUND + 123
    ledger.reservations[ref] = replace(made, tokens=older_bound)

    # When the client retries with the same key
    job = submit(deps).job

    # Then the job holds the reservation as stored, so its settlement finds it (conditional on
    # its tokens) and releases exactly what was reserved
    assert job.budget == BudgetHold(period=made.period, tokens=older_bound)
    ended = job.model_copy(
        update={"status": JobStatus.SUCCEEDED, "usage": Usage(input_tokens=90, output_tokens=10)}
    )
    assert settle_job(ledger, ended) is True
    assert ledger.counter("acme", made.period).used == 100


def test_a_tenant_without_a_limit_pays_no_budget_write(
    repository: InMemoryJobRepository,
    payloads: InMemoryPayloadStore,
    clock: FakeClock,
    ledger: InMemoryBudgetLedger,
) -> None:
    deps = SubmitDependencies(
        settings(DEFAULT_MONTHLY_TOKENS="0"),
        repository,
        payloads,
        clock,
        ledger,
        InMemoryDocumentRepository(),
        InMemoryDocumentObjects(),
    )

    job = submit(deps).job

    assert job.budget is None
    assert ledger.writes == []
    assert job.status_document().reserved_tokens is None


def test_a_tenants_own_limit_overrides_the_stage_default(
    deps: SubmitDependencies, ledger: InMemoryBudgetLedger
) -> None:
    ledger.limits["acme"] = 0  # an operator made acme unlimited
    ledger.limits["globex"] = BOUND - 1  # and globex too small for one job

    assert submit(deps, key="acme").job.budget is None
    with pytest.raises(BudgetExceededError):
        submit(deps, key="globex", caller=OTHER_TENANT)
    assert ledger.writes == []


def test_another_tenants_budget_is_untouched(deps: SubmitDependencies, ledger: InMemoryBudgetLedger) -> None:
    submit(deps, key="acme")
    submit(deps, key="globex", caller=OTHER_TENANT)

    period = period_of(deps.clock.now())
    assert ledger.counter("acme", period).reserved == BOUND
    assert ledger.counter("globex", period).reserved == BOUND
    for n in range(2):
        submit(deps, key=f"more-{n}", caller=OTHER_TENANT)
    with pytest.raises(BudgetExceededError):
        submit(deps, key="more-2", caller=OTHER_TENANT)
    assert ledger.counter("acme", period).reserved == BOUND


def test_a_long_job_reserves_every_step(deps: SubmitDependencies, ledger: InMemoryBudgetLedger) -> None:
    text = "\n\n".join(f"Paragraph {n}. " + "word " * 2_000 for n in range(4))
    body = {"operation": "summarize", "input": {"text": text}}
    big = SubmitDependencies(
        settings(DEFAULT_MONTHLY_TOKENS="10000000"),
        deps.repository,
        deps.payloads,
        deps.clock,
        ledger,
        InMemoryDocumentRepository(),
        InMemoryDocumentObjects(),
    )

    job = submit(big, body=body).job

    plan = plan_job(text, Operation.SUMMARIZE, PlanParameters(), prompt_version=job.prompt_version)
    assert plan.total_steps > 1
    assert job.budget is not None
    assert job.budget.tokens == reservation_tokens(plan) > len(text.encode())


# --- the running cap, copied from the same read (DESIGN.md, "Fairness between tenants") -------


def test_the_tenants_running_cap_is_copied_onto_the_job_from_the_one_budget_read(
    repository: InMemoryJobRepository,
    payloads: InMemoryPayloadStore,
    clock: FakeClock,
    ledger: InMemoryBudgetLedger,
) -> None:
    # Given a stage capping tenants at 4, acme capped at 2 by an operator, globex on the default
    ledger.max_running["acme"] = 2
    deps = SubmitDependencies(
        settings(DEFAULT_MAX_RUNNING_PER_TENANT="4"),
        repository,
        payloads,
        clock,
        ledger,
        InMemoryDocumentRepository(),
        InMemoryDocumentObjects(),
    )

    # When each submits
    capped = submit(deps).job
    default = submit(deps, "key-2", OTHER_TENANT).job

    # Then each job carries its tenant's cap, and the submit read the budget once for it
    assert (capped.max_running, default.max_running) == (2, 4)
    assert ledger.reads == ["state", "state"]
    assert repository.jobs[capped.job_id].max_running == 2


def test_no_cap_anywhere_leaves_the_job_uncapped(deps: SubmitDependencies) -> None:
    assert submit(deps).job.max_running == 0
