"""Reserve-first under concurrency, on moto: a budget that fits ten jobs is never overspent.

Fifty submits of the tenant's users run at once through the submit use case and its real
adapters. Each waits at a barrier right before its reservation, after its budget read, so all
fifty reservations are in flight together, each having seen an untouched budget: whatever stops
the eleventh job is the reservation's condition, not luck or ordering. The control test runs the
same race against a check-then-record ledger and shows it overspends (so this test can fail).
Another thread samples the tenant's counter all the while.

The use case is called directly, not through the Lambda handler: Powertools keeps the current
event in state that concurrent invocations in one process would share (tests/support/containers.py).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from functions.submit.dependencies import SubmitDependencies
from functions.submit.service import submit_job
from functions.submit.settings import SubmitSettings
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger, counter_key
from shared.budgets import Reservation, ReserveOutcome, ReserveResult, period_of, reservation_tokens
from shared.clock import SystemClock
from shared.contract import Operation, SubmitRequest
from shared.errors import BudgetExceededError
from shared.job import Caller
from shared.planner import PlanParameters, plan_job
from shared.prompts import template_for
from tests.support.answers import QUIET_METRICS
from tests.support.storage import Storage

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from tests.support.aws import TestResources

pytestmark = [pytest.mark.integration, QUIET_METRICS]

TENANT = "acme"
USERS = [Caller(tenant=TENANT, sub=f"user-{n}") for n in range(5)]
SUBMITS = 50
FITS = 10
TEXT = "Summarize the incident report: the deploy at 10:02 rolled back at 10:09."
REQUEST = SubmitRequest.model_validate({"operation": "summarize", "input": {"text": TEXT}})
BOUND = reservation_tokens(
    plan_job(
        TEXT, Operation.SUMMARIZE, PlanParameters(), prompt_version=template_for(Operation.SUMMARIZE).version
    )
)
LIMIT = FITS * BOUND


class Sampler:
    """Reads the tenant's counter over and over (strongly consistent) until stopped."""

    def __init__(self, dynamodb: DynamoDBClient, table: str, period: str) -> None:
        self.samples: list[tuple[int, int]] = []
        self._dynamodb, self._table, self._period = dynamodb, table, period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            item = self._dynamodb.get_item(
                TableName=self._table, Key=counter_key(TENANT, self._period), ConsistentRead=True
            ).get("Item", {})
            used = int(item.get("usedTokens", {}).get("N", "0"))
            reserved = int(item.get("reservedTokens", {}).get("N", "0"))
            self.samples.append((used, reserved))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _race(deps: SubmitDependencies) -> list[str]:
    """Fifty submits from five users at once; each one's outcome."""

    def submit(index: int) -> str:
        try:
            submit_job(deps, USERS[index % len(USERS)], REQUEST, f"race-{index}")
        except BudgetExceededError:
            return "budget_exceeded"
        return "accepted"

    with ThreadPoolExecutor(max_workers=SUBMITS) as pool:
        return list(pool.map(submit, range(SUBMITS)))


def _deps(storage: Storage, ledger: DynamoBudgetLedger) -> SubmitDependencies:
    return SubmitDependencies(
        SubmitSettings.from_environ(), storage.repository(), storage.payloads(), SystemClock(), ledger
    )


def test_fifty_concurrent_submits_for_a_budget_of_ten_accept_exactly_ten(resources: TestResources) -> None:
    # Given a tenant whose monthly budget fits exactly ten of these jobs
    storage = Storage(resources)
    barrier = threading.Barrier(SUBMITS)
    in_flight: list[int] = []

    class RacingLedger(DynamoBudgetLedger):
        """The production ledger; every reservation waits until all fifty are about to be made."""

        def reserve(self, reservation: Reservation, limit: int) -> ReserveResult:
            in_flight.append(barrier.wait(timeout=120))
            return super().reserve(reservation, limit)

    ledger = RacingLedger(storage.dynamodb, resources.budgets_table)
    ledger.set_limit(TENANT, LIMIT, datetime.now(UTC))
    period = period_of(datetime.now(UTC))

    # When fifty submits of its five users reserve at once, with the counter sampled throughout
    with Sampler(storage.dynamodb, resources.budgets_table, period) as sampler:
        outcomes = _race(_deps(storage, ledger))

    # Then all fifty raced (each got past the barrier), exactly ten were accepted and forty refused
    assert len(in_flight) == SUBMITS
    assert outcomes.count("accepted") == FITS
    assert outcomes.count("budget_exceeded") == SUBMITS - FITS
    # ... at no sampled moment was more committed than the limit, and the run was sampled while busy
    assert sampler.samples
    assert all(used + reserved <= LIMIT for used, reserved in sampler.samples)
    assert any(0 < reserved < LIMIT for _, reserved in sampler.samples)
    # ... ten reservations and ten jobs, each holding one; the refused left no claim behind
    state = ledger.state(TENANT, period)
    assert (state.used, state.reserved) == (0, LIMIT)
    jobs = [job for job in (storage.repository().get_job(j) for j in storage.job_ids()) if job is not None]
    assert len(jobs) == FITS
    assert all(job.budget is not None and job.budget.tokens == BOUND for job in jobs)
    assert len(storage.idempotency_items()) == FITS
    reservations = [
        i for i in storage.scan(resources.budgets_table) if i["pk"]["S"].startswith("RESERVATION#")
    ]
    assert sorted(i["jobId"]["S"] for i in reservations) == sorted(job.job_id for job in jobs)


def test_the_same_race_against_check_then_record_overspends(resources: TestResources) -> None:
    """The control: a ledger that checks what it read, then records without a condition."""
    storage = Storage(resources)
    barrier = threading.Barrier(SUBMITS)

    class CheckThenRecord(DynamoBudgetLedger):
        def reserve(self, reservation: Reservation, limit: int) -> ReserveResult:
            seen = self.state(reservation.tenant, reservation.period)
            barrier.wait(timeout=120)
            if seen.committed + reservation.tokens > limit:
                return ReserveResult(ReserveOutcome.EXCEEDED, committed=seen.committed)
            return super().reserve(reservation, limit=10**12)  # recorded without the real limit

    ledger = CheckThenRecord(storage.dynamodb, resources.budgets_table)
    ledger.set_limit(TENANT, LIMIT, datetime.now(UTC))

    outcomes = _race(_deps(storage, ledger))

    assert outcomes.count("accepted") > FITS
    assert ledger.state(TENANT, period_of(datetime.now(UTC))).reserved > LIMIT
