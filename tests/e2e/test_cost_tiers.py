"""The token bill end to end (DESIGN.md, "Cost tiers"), on a stack of its own: a model priced at
flex and batch (gpt-5-mini, from docs/model-prices.json); the flex fallback on a second stack whose
flexFallbackSeconds is short. Batch jobs go through the batcher and the poller to the local model
server's Batch API. Real HTTP, real JWTs, IAM enforced, the real openai SDK against the local
model server."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.e2e.conftest import E2E_CONTEXT, stop_without_denials
from tests.support.local_stack import (
    PROJECT_ROOT,
    RunningStack,
    assert_problem,
    request_hash,
    start_stack,
    unique,
)

FLEX_MODEL = "gpt-5-mini"
# The stage's default flexFallbackSeconds (an hour): no flex job here waits that long, so whether
# one falls back never depends on how fast a loaded machine runs it.
TIERS_CONTEXT = {**E2E_CONTEXT, "allowedModels": f"gpt-4o-mini,{FLEX_MODEL}"}
# The fallback's own stack: a wait short enough for a test to pass it.
FALLBACK_SECONDS = 15
FALLBACK_CONTEXT = {**TIERS_CONTEXT, "flexFallbackSeconds": str(FALLBACK_SECONDS)}


@pytest.fixture(scope="module")
def tiers_stack(request: pytest.FixtureRequest) -> Iterator[RunningStack]:
    running = start_stack(PROJECT_ROOT / "cdk.out.e2e-tiers", TIERS_CONTEXT, ["--schedule-seconds", "2"])
    yield running
    stop_without_denials(request, running, "the tiers stack")


@pytest.fixture(scope="module")
def fallback_stack(request: pytest.FixtureRequest) -> Iterator[RunningStack]:
    running = start_stack(PROJECT_ROOT / "cdk.out.e2e-fallback", FALLBACK_CONTEXT)
    yield running
    stop_without_denials(request, running, "the flex fallback stack")


def summarize(text: str, **options: Any) -> dict[str, Any]:
    return {"operation": "summarize", "input": {"text": text}, "options": options}


def run(stack: RunningStack, token: str, body: dict[str, Any], timeout_seconds: float = 90) -> dict[str, Any]:
    answer = stack.submit(token, body)
    assert answer.status == 202, answer.raw
    return stack.wait_terminal(answer.body["jobId"], token, timeout_seconds)


def test_a_flex_job_survives_two_refusals_with_its_attempts_unchanged(tiers_stack: RunningStack) -> None:
    token = tiers_stack.token(unique("flex-user"))
    text = unique("[[fault:flex_unavailable*2]] The flex tier is busy twice, then answers.")

    document = run(tiers_stack, token, summarize(text, model=FLEX_MODEL, tier="flex"))

    assert document["status"] == "Succeeded"
    assert document["attempts"] == 1  # the two deferrals spent none
    assert document["usage"]["tiers"] == ["flex"]
    calls = tiers_stack.model_calls(request_hash("summarize", text), at_least=3)
    assert [call["status"] for call in calls] == [429, 429, 200]


def test_a_flex_job_refused_past_the_fallback_succeeds_at_standard(fallback_stack: RunningStack) -> None:
    token = fallback_stack.token(unique("fallback-user"))
    text = unique("[[fault:flex_unavailable*1000]] The flex tier never has room for this one.")
    body = summarize(text, model=FLEX_MODEL, tier="flex")

    document = run(fallback_stack, token, body, FALLBACK_SECONDS + 90)

    assert document["status"] == "Succeeded"
    assert document["usage"]["tiers"] == ["standard"]  # the answer came at standard, and says so
    assert document["attempts"] == 1
    calls = fallback_stack.model_calls(request_hash("summarize", text), at_least=2)
    assert calls[-1]["status"] == 200
    assert all(call["status"] == 429 for call in calls[:-1])


def test_a_long_documents_map_steps_report_cached_input_tokens(tiers_stack: RunningStack) -> None:
    token = tiers_stack.token(unique("cache-user"))
    paragraph = "The quarterly report covers revenue, costs, hiring and the outlook for each region. "
    text = unique("Report.") + " " + paragraph * 1200  # about 25,000 tokens: several map steps

    first = run(tiers_stack, token, summarize(text))
    again = run(tiers_stack, token, summarize(text))

    assert first["status"] == again["status"] == "Succeeded"
    assert again["progress"]["totalSteps"] > 2
    # The first run's map prompts differ early (their part numbers); the second run's repeat the
    # first run's, each thousands of tokens long.
    assert first["usage"]["cachedInputTokens"] == 0
    assert again["usage"]["cachedInputTokens"] >= 1024 * 2
    assert again["usage"]["cachedInputTokens"] <= again["usage"]["inputTokens"]


def test_a_pair_the_price_table_does_not_offer_is_400_tier_unavailable(tiers_stack: RunningStack) -> None:
    token = tiers_stack.token(unique("refused-user"))

    flex_default_model = tiers_stack.submit(token, summarize("Text.", tier="flex"))

    assert_problem(flex_default_model, 400, "tier_unavailable")


def test_a_batch_job_waits_on_the_providers_batch_then_succeeds(tiers_stack: RunningStack) -> None:
    token = tiers_stack.token(unique("batch-user"))
    text = unique("A back-office summary that can wait for the Batch API.")
    answer = tiers_stack.submit(token, summarize(text, model=FLEX_MODEL, tier="batch"))
    assert answer.status == 202, answer.raw
    job_id = answer.body["jobId"]

    waiting = wait_for(tiers_stack, job_id, token, lambda doc: doc.get("waitingFor") == "provider_batch")
    assert waiting["status"] == "Running"
    document = tiers_stack.wait_terminal(job_id, token, 90)

    assert document["status"] == "Succeeded", document
    assert document["waitingFor"] is None
    assert document["usage"]["tiers"] == ["batch"]
    assert document["attempts"] == 1  # waiting on a batch spends no attempt
    [call] = tiers_stack.model_calls(request_hash("summarize", text), at_least=1)
    assert call["status"] == 200
    result = tiers_stack.call("GET", f"/v1/jobs/{job_id}/result", token=token)
    assert result.status == 200
    assert result.body["output"]


def test_a_batch_classify_job_stored_beside_its_item_ends_with_one_of_its_labels(
    tiers_stack: RunningStack,
) -> None:
    # An input over the job item's share is stored on its own: the poller, which ends a one-step
    # batch job itself, reads the labels from there under its own role
    token = tiers_stack.token(unique("classify-batch-user"))
    text = unique("A customer review.") + " The delivery was quick and the product works well." * 250
    labels = ["Positive", "Negative"]
    body = {
        "operation": "classify",
        "input": {"text": text},
        "options": {"labels": labels, "model": FLEX_MODEL, "tier": "batch"},
    }

    document = run(tiers_stack, token, body, 120)

    assert document["status"] == "Succeeded", document
    assert document["progress"]["totalSteps"] == 1
    assert document["usage"]["tiers"] == ["batch"]
    result = tiers_stack.call("GET", f"/v1/jobs/{document['jobId']}/result", token=token)
    assert result.status == 200
    assert result.body["output"] in labels


def test_a_long_batch_document_goes_through_batch_after_batch(tiers_stack: RunningStack) -> None:
    token = tiers_stack.token(unique("long-batch-user"))
    paragraph = "The archive holds minutes, ledgers and letters from each branch office. "
    text = unique("Archive.") + " " + paragraph * 600  # several map steps, then their reduce
    answer = tiers_stack.submit(token, summarize(text, model=FLEX_MODEL, tier="batch"))
    assert answer.status == 202, answer.raw
    job_id = answer.body["jobId"]

    wait_for(tiers_stack, job_id, token, lambda doc: doc.get("waitingFor") == "provider_batch")
    moved = wait_for(
        tiers_stack,
        job_id,
        token,
        lambda doc: doc["progress"]["completedSteps"] > 0 or doc["status"] in {"Succeeded", "Failed"},
        90,
    )
    document = tiers_stack.wait_terminal(job_id, token, 120)

    assert document["status"] == "Succeeded", document
    assert moved["progress"]["completedSteps"] > 0, moved
    assert document["progress"]["totalSteps"] > 2
    assert document["usage"]["tiers"] == ["batch"]


def test_an_expired_batch_falls_back_and_succeeds(tiers_stack: RunningStack) -> None:
    token = tiers_stack.token(unique("expired-user"))
    text = unique("[[fault:batch_expired]] The batch never reaches this one.")

    document = run(tiers_stack, token, summarize(text, model=FLEX_MODEL, tier="batch"), 120)

    assert document["status"] == "Succeeded", document
    assert "batch" not in document["usage"]["tiers"]  # answered outside the batch: flex, then standard
    [call] = tiers_stack.model_calls(request_hash("summarize", text), at_least=1)
    assert call["status"] == 200


def test_a_cancelled_batch_job_ends_canceled_without_its_output(tiers_stack: RunningStack) -> None:
    token = tiers_stack.token(unique("cancel-batch-user"))
    answer = tiers_stack.submit(
        token, summarize(unique("Cancel me in my batch."), model=FLEX_MODEL, tier="batch")
    )
    assert answer.status == 202, answer.raw
    job_id = answer.body["jobId"]
    wait_for(tiers_stack, job_id, token, lambda doc: doc.get("waitingFor") == "provider_batch")

    cancel = tiers_stack.call("POST", f"/v1/jobs/{job_id}/cancellation", token=token)
    assert cancel.status in {200, 202}, cancel.raw
    document = tiers_stack.wait_terminal(job_id, token, 60)

    assert document["status"] == "Canceled"
    assert document["resultUrl"] is None


def test_a_batch_job_may_not_stream(tiers_stack: RunningStack) -> None:
    token = tiers_stack.token(unique("batch-stream-user"))

    refused = tiers_stack.submit(token, summarize("Text.", model=FLEX_MODEL, tier="batch", stream=True))

    assert refused.status == 400


def wait_for(
    stack: RunningStack, job_id: str, token: str, seen: Callable[[dict[str, Any]], bool], timeout: float = 60
) -> dict[str, Any]:
    """Poll the job until `seen` holds of its status document."""
    deadline = time.monotonic() + timeout
    while True:
        document: dict[str, Any] = stack.call("GET", f"/v1/jobs/{job_id}", token=token).body
        if seen(document):
            return document
        assert time.monotonic() < deadline, f"never seen; last {document}"
        time.sleep(0.2)
