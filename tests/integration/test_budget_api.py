"""Budgets at the HTTP edge, through the handlers on moto: 403 budget_exceeded, reservedTokens on the
status document until settlement, GET /v1/budget for the caller's own tenant, and the notifier
settling a job in the month it reserved in."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from functions.budget.handler import lambda_handler as budget_handler
from functions.notifier.handler import lambda_handler as notifier_handler
from shared import resources as r
from shared.adapters.dynamo_items import job_to_item
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.budgets import (
    ReservationRef,
    new_reservation,
    period_end,
    period_of,
    reservation_tokens,
    settle_job,
)
from shared.contract import Operation
from shared.job import BudgetHold, Usage
from shared.lifecycle import JobStatus
from shared.plan_parameters import PlanParameters
from shared.planner import plan_job
from shared.prompts import template_for
from tests.fakes import job_record
from tests.support.answers import (
    QUIET_METRICS,
    SUMMARIZE,
    Answer,
    accepted,
    assert_problem,
    assert_status_document,
    call_status,
    call_submit,
)
from tests.support.aws import create_connections_table, create_webhooks_queues, create_webhooks_table
from tests.support.events import api_event, job_event, submit_event
from tests.support.lambda_context import FakeLambdaContext
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = [pytest.mark.integration, QUIET_METRICS]

BOUND = reservation_tokens(
    plan_job(
        SUMMARIZE["input"]["text"],
        Operation.SUMMARIZE,
        PlanParameters(),
        prompt_version=template_for(Operation.SUMMARIZE).version,
    )
)


@pytest.fixture
def storage(resources: TestResources) -> Storage:
    return Storage(resources)


@pytest.fixture
def ledger(resources: TestResources, storage: Storage) -> DynamoBudgetLedger:
    return DynamoBudgetLedger(storage.dynamodb, resources.budgets_table)


def _budget(**identity: Any) -> Answer:
    event = api_event("get_budget", **identity)
    response = budget_handler(event, FakeLambdaContext())
    return Answer(event, response["statusCode"], dict(response.get("headers") or {}), response["body"])


def _period() -> str:
    return period_of(datetime.now(UTC))


def test_a_submit_that_does_not_fit_is_a_403_problem_and_leaves_nothing(
    storage: Storage, ledger: DynamoBudgetLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a stage budget that fits one job and has one already
    monkeypatch.setenv("DEFAULT_MONTHLY_TOKENS", str(BOUND + BOUND // 2))
    first = accepted(call_submit(submit_event(SUMMARIZE, key="fits")))
    claims_before = storage.idempotency_items()

    # When another job is submitted
    refused = call_submit(submit_event(SUMMARIZE, key="over"))

    # Then it is a 403 budget_exceeded problem saying what is left and when the period resets, with
    # no Retry-After; its claim is gone and it reserved nothing
    problem = assert_problem(refused, 403, "budget_exceeded")
    assert f"{BOUND // 2:,} of the tenant's {BOUND + BOUND // 2:,}" in problem["detail"]
    assert period_end(_period()).strftime("%Y-%m-%dT%H:%M:%S") in problem["detail"]
    assert refused.header("Retry-After") is None
    assert storage.idempotency_items() == claims_before
    assert storage.job_ids() == [first]
    assert ledger.state("acme", _period()).reserved == BOUND


def test_reserved_tokens_show_until_the_job_is_settled(
    storage: Storage, ledger: DynamoBudgetLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEFAULT_MONTHLY_TOKENS", "1000000")
    # Given an accepted job: its 202, its status and the list show what it reserved
    submitted = call_submit(submit_event(SUMMARIZE, key="shown"))
    job_id = accepted(submitted)
    assert_status_document(submitted.body, "Pending")
    assert submitted.body["reservedTokens"] == BOUND
    assert call_status(job_event("get_status", job_id)).body["reservedTokens"] == BOUND

    # When it is canceled (ended, but no settlement has run yet), it still holds them
    canceled = call_status(job_event("cancel", job_id))
    assert (canceled.status, canceled.body["reservedTokens"]) == (200, BOUND)
    assert call_status(job_event("get_status", job_id)).body["reservedTokens"] == BOUND
    assert call_status(api_event("list", query={})).body["items"][0]["reservedTokens"] == BOUND

    # When it is settled, it holds none
    job = storage.repository().get_job(job_id)
    assert job is not None
    assert settle_job(ledger, job)
    assert call_status(job_event("get_status", job_id)).body["reservedTokens"] is None
    assert call_status(api_event("list", query={})).body["items"][0]["reservedTokens"] is None
    assert (ledger.state("acme", _period()).used, ledger.state("acme", _period()).reserved) == (0, 0)


def test_the_budget_route_shows_the_callers_tenant_only(
    ledger: DynamoBudgetLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a stage default, one tenant with its own limit, and a reservation of acme's
    monkeypatch.setenv("DEFAULT_MONTHLY_TOKENS", "50000")
    ledger.set_limit("globex", 0, datetime.now(UTC))
    accepted(call_submit(submit_event(SUMMARIZE, key="counted")))

    # When each tenant asks for its budget
    acme = _budget()
    globex = _budget(tenant="globex")
    personal = _budget(tenant=None, sub="dora")

    # Then each sees its own: acme its reservation, globex no limit, dora's personal tenant untouched
    assert acme.status == 200
    period = _period()
    resets = period_end(period).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert acme.body == {
        "period": period,
        "limitTokens": 50_000,
        "usedTokens": 0,
        "reservedTokens": BOUND,
        "remainingTokens": 50_000 - BOUND,
        "resetsAt": resets,
    }
    assert (globex.body["limitTokens"], globex.body["remainingTokens"], globex.body["reservedTokens"]) == (
        None,
        None,
        0,
    )
    assert (personal.body["limitTokens"], personal.body["reservedTokens"]) == (50_000, 0)


def test_a_job_that_outlives_its_month_settles_into_the_month_it_reserved_in(
    resources: TestResources, storage: Storage, ledger: DynamoBudgetLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job that reserved in December and ends in January (its terminal write on the stream)
    monkeypatch.setenv(r.ENV_CONNECTIONS_TABLE, create_connections_table(os.environ["AWS_ENDPOINT_URL"]))
    monkeypatch.setenv(r.ENV_CONNECTIONS_ENDPOINT, "http://127.0.0.1:9/never-called")
    # No webhook endpoint is registered: the notifier enqueues nothing.
    monkeypatch.setenv(r.ENV_WEBHOOKS_TABLE, create_webhooks_table(os.environ["AWS_ENDPOINT_URL"]))
    monkeypatch.setenv(r.ENV_WEBHOOKS_QUEUE_URL, create_webhooks_queues(os.environ["AWS_ENDPOINT_URL"])[0])
    december = datetime(2029, 12, 31, 23, 50, tzinfo=UTC)
    hold = BudgetHold(period="2029-12", tokens=9_000)
    job = job_record(december, tenant="acme", budget=hold)
    ledger.reserve(
        new_reservation(
            "acme",
            ReservationRef(job.job_id, 0),
            9_000,
            now=december,
            period="2029-12",
            held_until=december + timedelta(hours=24),
            grace=timedelta(minutes=15),
        ),
        limit=10_000,
    )
    ended = job.model_copy(
        update={
            "status": JobStatus.SUCCEEDED,
            "updated_at": datetime(2030, 1, 1, 0, 20, tzinfo=UTC),
            "usage": Usage(input_tokens=2_500, output_tokens=500),
            "revision": 5,
        }
    )
    image = job_to_item(ended, sweep_at=None)
    image[r.WRITE_KIND_ATTRIBUTE] = {"S": "terminal"}
    record = {
        "eventID": "e1",
        "eventName": "MODIFY",
        "eventSource": "aws:dynamodb",
        "dynamodb": {"NewImage": image, "SequenceNumber": "1" * 21, "StreamViewType": "NEW_IMAGE"},
    }

    # When the notifier gets the record, twice
    for _ in range(2):
        response = notifier_handler({"Records": [record]}, FakeLambdaContext())
        assert response == {"batchItemFailures": []}

    # Then December is settled once, and January never saw the job
    december_state = ledger.state("acme", "2029-12")
    assert (december_state.used, december_state.reserved) == (3_000, 0)
    january = ledger.state("acme", "2030-01")
    assert (january.used, january.reserved) == (0, 0)


def test_replays_and_a_reused_key_reserve_nothing_more(
    resources: TestResources, storage: Storage, ledger: DynamoBudgetLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEFAULT_MONTHLY_TOKENS", "1000000")
    job_id = accepted(call_submit(submit_event(SUMMARIZE, key="once")))

    # When the same submit is replayed twice and the key is reused for another body
    replays = [call_submit(submit_event(SUMMARIZE, key="once")) for _ in range(2)]
    reused = call_submit(submit_event({"operation": "analyze", "input": {"text": "Other."}}, key="once"))

    # Then one reservation exists, of the one job
    assert [accepted(replay) for replay in replays] == [job_id, job_id]
    assert all(replay.header("Idempotent-Replayed") == "true" for replay in replays)
    assert_problem(reused, 409, "idempotency_key_reused")
    assert ledger.state("acme", _period()).reserved == BOUND
    reservations = [
        i for i in storage.scan(resources.budgets_table) if i["pk"]["S"].startswith("RESERVATION#")
    ]
    assert [i["jobId"]["S"] for i in reservations] == [job_id]
