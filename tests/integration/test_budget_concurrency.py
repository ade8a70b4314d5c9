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

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config

from functions.submit.dependencies import SubmitDependencies
from functions.submit.service import submit_job
from functions.submit.settings import SubmitSettings
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger, counter_key
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.payloads import DynamoS3PayloadStore
from shared.budgets import Reservation, ReserveOutcome, ReserveResult, period_of, reservation_tokens
from shared.clock import SystemClock
from shared.contract import Operation, SubmitRequest
from shared.errors import BudgetExceededError
from shared.job import Caller
from shared.plan_parameters import PlanParameters
from shared.planner import plan_job
from shared.prompts import template_for
from tests.document_fakes import InMemoryDocumentObjects, InMemoryDocumentRepository
from tests.support.answers import QUIET_METRICS
from tests.support.aws import REGION
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
    """Reads the tenant's counter over and over (strongly consistent) on its own thread until stopped.

    `fresh_sample` lets a submit wait until a sample that began after its own reservation has
    been taken, so every reservation of the race is followed by one (no timing assumption).
    """

    def __init__(self, dynamodb: DynamoDBClient, table: str, period: str) -> None:
        self.samples: list[tuple[int, int]] = []
        self._dynamodb, self._table, self._period = dynamodb, table, period
        self._stop = threading.Event()
        self._taken = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            item = self._dynamodb.get_item(
                TableName=self._table, Key=counter_key(TENANT, self._period), ConsistentRead=True
            ).get("Item", {})
            used = int(item.get("usedTokens", {}).get("N", "0"))
            reserved = int(item.get("reservedTokens", {}).get("N", "0"))
            with self._taken:
                self.samples.append((used, reserved))
                self._taken.notify_all()

    def fresh_sample(self) -> None:
        """Wait for a sample that started after this call (the one under way may have read before)."""
        with self._taken:
            wanted = len(self.samples) + 2
            assert self._taken.wait_for(lambda: len(self.samples) >= wanted, timeout=120)

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


def _client() -> DynamoDBClient:
    """A client with a connection for each of the fifty submits (boto3's default pool holds 10)."""
    return boto3.client(
        "dynamodb",
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        region_name=REGION,
        config=Config(max_pool_connections=SUBMITS + 2),
    )


def _deps(resources: TestResources, ledger: DynamoBudgetLedger, client: DynamoDBClient) -> SubmitDependencies:
    settings = SubmitSettings.from_environ()
    return SubmitDependencies(
        settings,
        DynamoJobRepository(client, resources.jobs_table, resources.idempotency_table),
        DynamoS3PayloadStore(client, lambda: boto3.client("s3"), resources.jobs_table, resources.bucket),
        SystemClock(),
        ledger,
        InMemoryDocumentRepository(),
        InMemoryDocumentObjects(),
    )


def test_fifty_concurrent_submits_for_a_budget_of_ten_accept_exactly_ten(resources: TestResources) -> None:
    # Given a tenant whose monthly budget fits exactly ten of these jobs
    storage = Storage(resources)
    barrier = threading.Barrier(SUBMITS)
    in_flight: list[int] = []
    period = period_of(datetime.now(UTC))
    sampler = Sampler(storage.dynamodb, resources.budgets_table, period)

    class RacingLedger(DynamoBudgetLedger):
        """The production ledger; every reservation waits until all fifty are about to be made,
        and after it, until the other thread has sampled the counter."""

        def reserve(self, reservation: Reservation, limit: int) -> ReserveResult:
            in_flight.append(barrier.wait(timeout=120))
            result = super().reserve(reservation, limit)
            sampler.fresh_sample()
            return result

    client = _client()
    ledger = RacingLedger(client, resources.budgets_table)
    ledger.set_limit(TENANT, LIMIT, datetime.now(UTC))

    # When fifty submits of its five users reserve at once, with the counter sampled throughout
    with sampler:
        outcomes = _race(_deps(resources, ledger, client))

    # Then all fifty raced (each got past the barrier), exactly ten were accepted and forty refused
    assert len(in_flight) == SUBMITS
    assert outcomes.count("accepted") == FITS
    assert outcomes.count("budget_exceeded") == SUBMITS - FITS
    # ... and at no sampled moment (one at least after each of the fifty reservations, while the
    # others were still racing) was more committed than the limit
    assert len(sampler.samples) >= 2
    assert all(used + reserved <= LIMIT for used, reserved in sampler.samples)
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
    barrier = threading.Barrier(SUBMITS)

    class CheckThenRecord(DynamoBudgetLedger):
        def reserve(self, reservation: Reservation, limit: int) -> ReserveResult:
            seen = self.state(reservation.tenant, reservation.period)
            barrier.wait(timeout=120)
            if seen.committed + reservation.tokens > limit:
                return ReserveResult(ReserveOutcome.EXCEEDED, committed=seen.committed)
            return super().reserve(reservation, limit=10**12)  # recorded without the real limit

    client = _client()
    ledger = CheckThenRecord(client, resources.budgets_table)
    ledger.set_limit(TENANT, LIMIT, datetime.now(UTC))

    outcomes = _race(_deps(resources, ledger, client))

    assert outcomes.count("accepted") > FITS
    assert ledger.state(TENANT, period_of(datetime.now(UTC))).reserved > LIMIT
