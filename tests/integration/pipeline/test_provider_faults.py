"""Provider faults, injected by directives the local model server obeys, through the real openai SDK.

Transient faults (429, 5xx, timeouts) go back to Pending with a backoff carried by the message's
visibility; terminal ones fail at once. `attempts` counts claims, and each claim makes at most one
model call, so attempts == model calls in every case. No status document ever shows the
provider's own error text: only the worker's fixed message for the job error code.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

import pytest

from shared.job_errors import ERROR_MESSAGES
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.integration

# What the provider (or the SDK, or Python) says, which a caller must never read.
LEAKS = (
    "rate_limit_exceeded",
    "server_error",
    "content_policy_violation",
    "injected",
    "Error code",
    "openai",
    "OpenAI",
    "Traceback",
    "sk-local-test",
    "Request timed out",
    "leaseToken",
)


@dataclass(frozen=True)
class Scenario:
    directive: str
    status: str
    attempts: int
    outcomes: list[str]
    error_code: str | None = None


SCENARIOS = [
    Scenario("[[fault:rate_limit*2]]", "Succeeded", 3, ["rate_limit", "rate_limit", "ok"]),
    Scenario(
        "[[fault:rate_limit*5]]",
        "Failed",
        3,
        ["rate_limit", "rate_limit", "rate_limit"],
        "retries_exhausted",
    ),
    Scenario("[[fault:server_error*1]]", "Succeeded", 2, ["server_error", "ok"]),
    Scenario("[[fault:timeout*1]]", "Succeeded", 2, ["timeout", "ok"]),
    Scenario("[[fault:context_length]]", "Failed", 1, ["context_length"], "context_length_exceeded"),
    Scenario("[[fault:content_policy]]", "Failed", 1, ["content_policy"], "content_policy"),
]


def _assert_no_leak(document: dict[str, Any]) -> None:
    text = json.dumps(document)
    for leak in LEAKS:
        assert leak not in text, f"{leak!r} leaked into {text}"
    error = document.get("error")
    if error is not None:
        assert error["message"] == ERROR_MESSAGES[error["code"]]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.directive.strip("[]") for s in SCENARIOS])
def test_provider_fault(pipeline: Pipeline, scenario: Scenario) -> None:
    # Given a job whose input tells the model server to misbehave
    text = f"Quarterly report for the board. {scenario.directive} Revenue grew while costs held."
    accepted = pipeline.submit({"operation": "summarize", "input": {"text": text}}, key="fault")
    job_id = accepted["body"]["jobId"]

    # When the pipeline runs until the job ends
    [final], history = pipeline.terminal_with_history(job_id)

    # Then it ended as expected, one model call per attempt, in the order the faults were scheduled
    assert final["status"] == scenario.status
    assert final["attempts"] == scenario.attempts
    calls = pipeline.model_calls()
    assert [c["outcome"] for c in calls] == scenario.outcomes
    assert len({c["requestHash"] for c in calls}) == 1
    if scenario.error_code is None:
        assert final["error"] is None
        assert pipeline.result(job_id)["statusCode"] == 200
    else:
        assert final["error"] == {"code": scenario.error_code, "message": ERROR_MESSAGES[scenario.error_code]}
        result = pipeline.result(job_id)
        assert result["statusCode"] == 409
        assert result["body"]["code"] == "job_not_succeeded"
        _assert_no_leak(result["body"])
    # ... and no document on the way showed what the provider said
    assert {d["status"] for d in history} <= {"Pending", "Running", scenario.status}
    for document in [accepted["body"], *history, final]:
        _assert_no_leak(document)
    # ... and no retry came before its backoff (at least 1 s after the failed call: the next claim
    # requires dispatchAt, failure time + backoff, to have passed; same host clock on both sides)
    for before, after in itertools.pairwise(calls):
        assert after["started"] - before["started"] >= 0.99
