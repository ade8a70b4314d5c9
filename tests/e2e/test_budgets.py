"""Token budgets end to end on the local stack: an operator sets a tenant's limit with
`outlast ops budgets set --local`, the tenant's users submit until it is full (403 budget_exceeded),
`GET /v1/budget` and the status documents show what is held, and once the jobs end every token
is settled to what they used (the notifier on the stream), so a refused submit fits again.

The stack's stage default (the chaos context: a large budget for every tenant) is overridden for
this run's own tenant, so nothing else on the shared stack is affected.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from shared.budgets import reservation_tokens
from shared.contract import Operation
from shared.plan_parameters import PlanParameters
from shared.planner import plan_job
from shared.prompts import template_for
from tests.support.cli import run
from tests.support.cli import run as run_cli
from tests.support.local_stack import RunningStack, assert_problem, assert_status_document, new_key

pytestmark = pytest.mark.e2e

SETTLE_TIMEOUT_SECONDS = 60


def _text(n: int) -> str:
    return f"Budget report {n} of {uuid.uuid4().hex}. [[delay:1]] Revenue rose."


def _bound(text: str) -> int:
    version = template_for(Operation.SUMMARIZE).version
    return reservation_tokens(plan_job(text, Operation.SUMMARIZE, PlanParameters(), prompt_version=version))


def _operator(stack: RunningStack, *argv: str) -> tuple[int, Any]:
    code, out, _ = run_cli("ops", *argv, "--local", "--port", str(stack.port), "--json")
    return code, json.loads(out)


def _tokens(document: dict[str, Any]) -> int:
    usage = document["usage"]
    return int(usage["inputTokens"] + usage["outputTokens"]) if usage else 0


def test_a_tenant_fills_its_budget_is_refused_and_fits_again_once_jobs_settle(
    stack: RunningStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a tenant of two users whose own monthly limit fits two of these jobs, not three
    tenant = f"budget-{uuid.uuid4().hex[:8]}"
    alice, bob = stack.token(f"alice-{tenant}", tenant), stack.token(f"bob-{tenant}", tenant)
    texts = [_text(n) for n in range(3)]
    bounds = [_bound(text) for text in texts]
    limit = bounds[0] + bounds[1] + bounds[2] // 2
    code, shown = _operator(stack, "budgets", "set", "--tenant", tenant, "--monthly-tokens", str(limit))
    assert code == 0
    assert (shown["budget"]["limitTokens"], shown["budget"]["ownLimitTokens"]) == (limit, limit)

    # When both users submit jobs until it is full
    first = stack.submit(alice, {"operation": "summarize", "input": {"text": texts[0]}})
    second = stack.submit(bob, {"operation": "summarize", "input": {"text": texts[1]}})
    third_key = new_key()
    refused = stack.submit(alice, {"operation": "summarize", "input": {"text": texts[2]}}, key=third_key)

    # Then two are accepted holding their bounds, and the third is a 403 saying what is left
    assert (first.status, second.status) == (202, 202), (first.body, second.body)
    assert_status_document(first.body)
    assert (first.body["reservedTokens"], second.body["reservedTokens"]) == (bounds[0], bounds[1])
    problem = assert_problem(refused, 403, "budget_exceeded")
    assert f"{bounds[2]:,} tokens" in problem["detail"]
    assert f"{bounds[2] // 2:,} of the tenant's {limit:,}" in problem["detail"]
    assert "retry-after" not in refused.headers
    budget = stack.call("GET", "/v1/budget", token=bob).body
    assert (budget["limitTokens"], budget["reservedTokens"], budget["remainingTokens"]) == (
        limit,
        bounds[0] + bounds[1],
        bounds[2] // 2,
    )

    # When both jobs end and their settlements come in
    job_ids = [first.body["jobId"], second.body["jobId"]]
    ended = [stack.wait_terminal(job_id, token) for job_id, token in zip(job_ids, (alice, bob), strict=True)]
    deadline = time.monotonic() + SETTLE_TIMEOUT_SECONDS
    while stack.call("GET", "/v1/budget", token=alice).body["reservedTokens"] and time.monotonic() < deadline:
        time.sleep(0.5)

    # Then nothing is held, used is what the jobs used, and the ended jobs hold nothing either
    settled = stack.call("GET", "/v1/budget", token=alice).body
    assert [document["status"] for document in ended] == ["Succeeded", "Succeeded"]
    spent = sum(_tokens(document) for document in ended)
    assert (settled["usedTokens"], settled["reservedTokens"]) == (spent, 0)
    assert settled["remainingTokens"] == limit - spent
    for job_id, token in zip(job_ids, (alice, bob), strict=True):
        assert stack.call("GET", f"/v1/jobs/{job_id}", token=token).body["reservedTokens"] is None
    # ... so the refused submit, retried with its key, fits now (its claim was deleted)
    again = stack.submit(alice, {"operation": "summarize", "input": {"text": texts[2]}}, key=third_key)
    assert again.status == 202, again.body
    assert "idempotent-replayed" not in again.headers

    # ... and the client's view agrees with the operator's
    monkeypatch.setenv("OUTLAST_TOKEN", alice)
    code, out, _ = run("budget", "--api-url", stack.url, "--json")
    assert code == 0
    assert json.loads(out)["reservedTokens"] == bounds[2]
    code, shown = _operator(stack, "budgets", "show", "--tenant", tenant)
    assert code == 0
    [row] = shown["tenants"]
    assert (row["usedTokens"], row["reservedTokens"]) == (spent, bounds[2])
