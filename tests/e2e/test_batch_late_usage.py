"""Late batch usage end to end (DESIGN.md, "Cost tiers" and "Token budgets"): a batch job canceled
while its provider batch runs is still billed for the answer the batch gives it, and that usage
comes onto the canceled job and into its tenant's budget once, through the batch poller's own role
(its grant on the budgets table: local mode enforces it, and the stack's stop fails on any denied
call).

Two batch jobs of one tenant (with a monthly limit, so each run holds a reservation) go into one
provider batch: this stack's batching window is long enough to gather both calls, and its local
model server's batches take long enough that the cancel of one is made while the batch still runs.
The poller ends that job Canceled at its next run; the batch stays alive, since the other job
still waits on it, and answers both: the other job succeeds with its answer, the canceled job's is
discarded and its usage counted late. Every wait is for a condition (the ops listing of open
batches, the jobs' status documents, the tenant's budget), never a sleep.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.conftest import stop_without_denials
from tests.e2e.test_cost_tiers import FLEX_MODEL, TIERS_CONTEXT, summarize, wait_for
from tests.support.cli import run as run_cli
from tests.support.local_stack import PROJECT_ROOT, RunningStack, request_hash, start_stack, unique

# Long enough for both jobs' calls to reach the batcher in one window.
BATCH_WINDOW_SECONDS = 10
# Long enough, after the batch is made, to see both jobs wait on it and request the cancel.
BATCH_SECONDS = 20
LATE_CONTEXT = {**TIERS_CONTEXT, "batchWindowSeconds": str(BATCH_WINDOW_SECONDS)}
MONTHLY_TOKENS = 1_000_000
TIMEOUT_SECONDS = 120


@pytest.fixture(scope="module")
def late_stack(request: pytest.FixtureRequest) -> Iterator[RunningStack]:
    running = start_stack(
        PROJECT_ROOT / "cdk.out.e2e-late",
        LATE_CONTEXT,
        ["--schedule-seconds", "2", "--batch-seconds", str(BATCH_SECONDS)],
    )
    yield running
    stop_without_denials(request, running, "the late usage stack")


def operator(stack: RunningStack, *argv: str) -> Any:
    """`outlast ops ... --local --json` against the stack; its JSON document."""
    code, out, _ = run_cli("ops", *argv, "--local", "--port", str(stack.port), "--json")
    assert code == 0, out
    return json.loads(out)


def eventually[T](look: Callable[[], T | None], what: str, timeout: float = TIMEOUT_SECONDS) -> T:
    """Look until `look` finds something (not None)."""
    deadline = time.monotonic() + timeout
    while True:
        found = look()
        if found is not None:
            return found
        assert time.monotonic() < deadline, f"never seen: {what}"
        time.sleep(0.5)


def shared_batch(stack: RunningStack, job_ids: set[str]) -> str | None:
    """The open batch whose jobs include all of `job_ids`, if there is one."""
    for batch in operator(stack, "batches", "list")["batches"]:
        if job_ids <= set(batch["jobIds"]):
            return str(batch["batchId"])
    return None


def tokens(document: dict[str, Any]) -> int:
    usage = document["usage"]
    return int(usage["inputTokens"] + usage["outputTokens"]) if usage else 0


def test_a_canceled_batch_jobs_late_answer_is_counted_once_on_the_job_and_the_budget(
    late_stack: RunningStack,
) -> None:
    # Given a tenant with a monthly limit, and two of its batch jobs waiting on one provider batch
    tenant = f"late-{uuid.uuid4().hex[:8]}"
    token = late_stack.token(unique("late-user"), tenant)
    operator(late_stack, "budgets", "set", "--tenant", tenant, "--monthly-tokens", str(MONTHLY_TOKENS))
    canceled_text = unique("A back-office summary canceled while its batch runs.")
    kept_text = unique("A back-office summary kept from the same batch.")
    submitted = [
        late_stack.submit(token, summarize(text, model=FLEX_MODEL, tier="batch"))
        for text in (canceled_text, kept_text)
    ]
    assert [answer.status for answer in submitted] == [202, 202], [answer.raw for answer in submitted]
    assert all(answer.body["reservedTokens"] > 0 for answer in submitted)  # each run holds its bound
    canceled_id, kept_id = (answer.body["jobId"] for answer in submitted)
    for job_id in (canceled_id, kept_id):
        wait_for(
            late_stack,
            job_id,
            token,
            lambda doc: doc.get("waitingFor") == "provider_batch",
            TIMEOUT_SECONDS,
        )
    batch_id = eventually(
        lambda: shared_batch(late_stack, {canceled_id, kept_id}), "both jobs in one open batch"
    )

    # When one of them is canceled while the batch runs
    cancel = late_stack.call("POST", f"/v1/jobs/{canceled_id}/cancellation", token=token)
    assert cancel.status in {200, 202}, cancel.raw

    # Then the poller ends it Canceled, the other succeeds with the batch's answer, and the batch
    # leaves the open list once the poller has seen it through
    canceled = late_stack.wait_terminal(canceled_id, token, TIMEOUT_SECONDS)
    assert canceled["status"] == "Canceled", canceled
    kept = late_stack.wait_terminal(kept_id, token, TIMEOUT_SECONDS)
    assert kept["status"] == "Succeeded", kept
    assert kept["usage"]["tiers"] == ["batch"]
    eventually(
        lambda: True if shared_batch(late_stack, {canceled_id}) is None else None,
        f"batch {batch_id} seen through",
    )

    # ... the canceled job's status shows what the provider billed for its discarded answer, once
    late = wait_for(late_stack, canceled_id, token, lambda doc: doc["usage"] is not None, TIMEOUT_SECONDS)
    assert late["status"] == "Canceled"
    assert late["resultUrl"] is None
    [billed] = late_stack.model_calls(request_hash("summarize", canceled_text), at_least=1)
    assert billed["status"] == 200  # the batch answered it: a provider bills a batch line it ran
    assert (late["usage"]["inputTokens"], late["usage"]["outputTokens"]) == (
        billed["usage"]["inputTokens"],
        billed["usage"]["outputTokens"],
    )
    assert late["usage"]["tiers"] == ["batch"]

    # ... and the tenant's budget counts it exactly once, beside the kept job's, nothing held
    def settled() -> dict[str, Any] | None:
        budget: dict[str, Any] = late_stack.call("GET", "/v1/budget", token=token).body
        return budget if budget["reservedTokens"] == 0 else None

    budget = eventually(settled, "both runs settled")
    assert budget["limitTokens"] == MONTHLY_TOKENS
    assert budget["usedTokens"] == tokens(late) + tokens(kept)
    assert budget["remainingTokens"] == MONTHLY_TOKENS - tokens(late) - tokens(kept)
