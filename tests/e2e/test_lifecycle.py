"""The lifecycle paths of the worker over HTTP: success per operation, transient faults retried
up to maxAttempts, terminal faults failed at once, a cancel while running.

The local model server obeys directives in the input text; every text here is unique, so its
fault counters (keyed by the request's messages) start at zero whatever ran before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.local_stack import (
    RunningStack,
    assert_problem,
    assert_retry_after,
    assert_status_document,
    assert_unchanged,
    request_hash,
    unique,
)

LABELS = ("billing", "shipping", "returns")


@dataclass(frozen=True)
class Submitted:
    """A job this module submitted, and how to reach it."""

    job_id: str
    token: str
    operation: str
    text: str
    labels: tuple[str, ...] | None = None

    @property
    def request_hash(self) -> str:
        return request_hash(self.operation, self.text, self.labels)


def _body(operation: str, text: str, labels: tuple[str, ...] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"operation": operation, "input": {"text": text}}
    if labels:
        body["options"] = {"labels": list(labels)}
    return body


# name -> (operation, text, labels). Submitted together up front so the worker runs them side by side.
JOBS: dict[str, tuple[str, str, tuple[str, ...] | None]] = {
    "summarize": ("summarize", "The parcel arrived late. The box was dented. Support replied fast.", None),
    "analyze": ("analyze", "Refunds matter. Refunds take days. Customers notice refunds.", None),
    "classify": ("classify", "Where is my parcel? The shipping label says it left last week.", LABELS),
    "rate_limit_twice": ("summarize", "Busy provider, then fine. [[fault:rate_limit*2]]", None),
    "rate_limit_always": ("summarize", "Busy provider for good. [[fault:rate_limit*5]]", None),
    "server_error_once": ("analyze", "A provider hiccup. [[fault:server_error*1]]", None),
    "timeout_once": ("summarize", "A provider that hangs once. [[fault:timeout*1]]", None),
    "context_length": ("analyze", "Far too long for the model. [[fault:context_length]]", None),
    "content_policy": ("summarize", "Something the provider refuses. [[fault:content_policy]]", None),
}


@pytest.fixture(scope="module")
def jobs(stack: RunningStack) -> dict[str, Submitted]:
    token = stack.token(unique("lifecycle"), "lifecycle")
    submitted = {}
    for name, (operation, text, labels) in JOBS.items():
        unique_text = f"{unique(name)}. {text}"
        answer = stack.submit(token, _body(operation, unique_text, labels))
        assert answer.status == 202, answer.raw
        submitted[name] = Submitted(answer.body["jobId"], token, operation, unique_text, labels)
    return submitted


def _terminal(stack: RunningStack, job: Submitted) -> dict[str, Any]:
    document = stack.wait_terminal(job.job_id, job.token)
    assert_status_document(document, job.job_id)
    assert document["operation"] == job.operation
    return document


@pytest.mark.parametrize("name", ["summarize", "analyze", "classify"])
def test_each_operation_succeeds_with_one_model_call(
    stack: RunningStack, jobs: dict[str, Submitted], name: str
) -> None:
    job = jobs[name]
    document = _terminal(stack, job)
    assert document["status"] == "Succeeded"
    assert document["attempts"] == 1
    assert document["usage"]["inputTokens"] > 0
    assert document["usage"]["outputTokens"] > 0
    result = stack.call("GET", document["resultUrl"], token=job.token)
    assert result.status == 200
    assert result.body["operation"] == job.operation
    assert result.body["usage"] == document["usage"]
    assert result.body["output"].strip()
    assert len(stack.model_calls(job.request_hash, at_least=1)) == 1


def test_classify_answers_with_one_of_the_callers_labels(
    stack: RunningStack, jobs: dict[str, Submitted]
) -> None:
    job = jobs["classify"]
    _terminal(stack, job)
    output = stack.call("GET", f"/v1/jobs/{job.job_id}/result", token=job.token).body["output"]
    assert output in LABELS
    assert output == "shipping"  # the label the text names


def test_two_rate_limits_then_success_takes_three_attempts(
    stack: RunningStack, jobs: dict[str, Submitted]
) -> None:
    job = jobs["rate_limit_twice"]
    document = _terminal(stack, job)
    assert document["status"] == "Succeeded"
    assert document["attempts"] == 3
    calls = stack.model_calls(job.request_hash, at_least=3)
    assert [call["status"] for call in calls] == [429, 429, 200]


@pytest.mark.parametrize(("name", "first"), [("server_error_once", 500), ("timeout_once", None)])
def test_a_5xx_or_a_timeout_is_retried_and_the_next_attempt_succeeds(
    stack: RunningStack, jobs: dict[str, Submitted], name: str, first: int | None
) -> None:
    """A timeout: the local model never answers, the worker's 5 s provider timeout gives up."""
    job = jobs[name]
    document = _terminal(stack, job)
    assert document["status"] == "Succeeded"
    assert document["attempts"] == 2
    calls = sorted(stack.model_calls(job.request_hash, at_least=2), key=lambda call: call["started"])
    assert [call["status"] for call in calls] == [first, 200]


def test_rate_limits_beyond_max_attempts_fail_with_retries_exhausted(
    stack: RunningStack, jobs: dict[str, Submitted]
) -> None:
    job = jobs["rate_limit_always"]
    document = _terminal(stack, job)
    assert document["status"] == "Failed"
    assert document["error"]["code"] == "retries_exhausted"
    assert document["attempts"] == 3  # maxAttempts, the default
    assert document["usage"] is None  # no call reported any
    assert len(stack.model_calls(job.request_hash, at_least=3)) == 3
    assert_problem(
        stack.call("GET", f"/v1/jobs/{job.job_id}/result", token=job.token), 409, "job_not_succeeded"
    )


@pytest.mark.parametrize(
    ("name", "code"), [("context_length", "context_length_exceeded"), ("content_policy", "content_policy")]
)
def test_a_terminal_provider_error_fails_the_job_at_once(
    stack: RunningStack, jobs: dict[str, Submitted], name: str, code: str
) -> None:
    job = jobs[name]
    document = _terminal(stack, job)
    assert document["status"] == "Failed"
    assert document["error"]["code"] == code
    assert document["error"]["message"]
    assert document["attempts"] == 1
    assert len(stack.model_calls(job.request_hash, at_least=1)) == 1


def test_no_status_document_shows_provider_error_text(
    stack: RunningStack, jobs: dict[str, Submitted]
) -> None:
    """assert_status_document already refuses the local model's error payloads; read every job
    once more through the list too, which serializes documents on its own path."""
    token = next(iter(jobs.values())).token
    documents = {name: _terminal(stack, job) for name, job in jobs.items()}
    listed = stack.call("GET", "/v1/jobs?limit=100", token=token).body["items"]
    by_id = {item["jobId"]: item for item in listed}
    for name, job in jobs.items():
        assert by_id[job.job_id] == documents[name]
        assert_status_document(by_id[job.job_id], job.job_id)


def test_cancel_while_running_ends_canceled_without_a_result(stack: RunningStack) -> None:
    token = stack.token(unique("lifecycle-cancel"))
    text = f"{unique('slow')}. A long answer. [[delay:4]]"
    job_id = stack.submit(token, _body("summarize", text, None)).body["jobId"]
    stack.wait_status(job_id, token, "Running")

    requested = stack.call("POST", f"/v1/jobs/{job_id}/cancellation", token=token)
    assert requested.status == 202, requested.raw
    assert requested.body["status"] == "CancellationRequested"
    assert requested.body["cancelRequestedAt"] is not None
    assert_status_document(requested.body, job_id)
    assert_retry_after(requested)

    document = stack.wait_terminal(job_id, token)
    assert document["status"] == "Canceled"
    assert document["cancelRequestedAt"] == requested.body["cancelRequestedAt"]
    assert document["attempts"] == 1
    assert document["resultUrl"] is None
    assert_problem(stack.call("GET", f"/v1/jobs/{job_id}/result", token=token), 409, "job_not_succeeded")
    again = stack.call("POST", f"/v1/jobs/{job_id}/cancellation", token=token)
    assert again.status == 200
    assert_unchanged(again.body, document)
