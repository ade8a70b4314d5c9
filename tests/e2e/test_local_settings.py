"""Local mode follows the CDK app: a second stack, synthesized with other context values, behaves
by them with no other edit. Also where only a stack of its own can help: the submit rate's 429
(3 a minute here instead of 60), a cancel that certainly finds its job Pending, and a clean stop.

The Pending cancel: over HTTP alone, a fresh job's claim races the cancel (the worker takes it
within a second or two). A job backing off after a rate limit is Pending with a known
`dispatchAt`, but locally the backoff is 1 s. This stack raises the worker's backoff base with
`outlast local up --env` (local policy, not CDK context, sets it), so a job that failed its
first attempt stays Pending for BACKOFF_BASE_SECONDS / 2 at least: seconds, not milliseconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from infra.names import API, JOBS_DLQ, JOBS_QUEUE, OUTBOX, FunctionName
from outlast.local.stack import state_path
from tests.e2e.conftest import E2E_CONTEXT
from tests.support.local_stack import (
    PROJECT_ROOT,
    Answer,
    RunningStack,
    accepts_connections,
    assert_problem,
    assert_retry_after,
    assert_status_document,
    descendants,
    port_of,
    request_hash,
    start_stack,
    still_running,
    stop_stack,
    unique,
)

SUBMITS_PER_MINUTE = 3
MAX_ATTEMPTS = 2
POLL_AFTER_SECONDS = 3
SETTINGS_CONTEXT = {
    **E2E_CONTEXT,
    "submitsPerMinute": str(SUBMITS_PER_MINUTE),
    "maxAttempts": str(MAX_ATTEMPTS),
    "pollAfterSeconds": str(POLL_AFTER_SECONDS),
}
BACKOFF_BASE_SECONDS = 6


@pytest.fixture(scope="module")
def settings_stack() -> Iterator[RunningStack]:
    running = start_stack(
        PROJECT_ROOT / "cdk.out.e2e-settings",
        SETTINGS_CONTEXT,
        ["--schedule-seconds", "2", "--env", f"BACKOFF_BASE_SECONDS={BACKOFF_BASE_SECONDS}"],
    )
    yield running
    if running.process.poll() is None:
        stop_stack(running)


def _summarize(text: str) -> dict[str, Any]:
    return {"operation": "summarize", "input": {"text": text}}


def _logical_id(template: dict[str, Any], kind: str, prefix: str) -> str:
    found = [
        str(lid) for lid, r in template["Resources"].items() if r["Type"] == kind and lid.startswith(prefix)
    ]
    assert len(found) == 1, (kind, prefix, found)
    return found[0]


def _jobs_queue(stack: RunningStack) -> tuple[str, dict[str, Any]]:
    template = stack.template()
    logical_id = _logical_id(template, "AWS::SQS::Queue", f"{OUTBOX}{JOBS_QUEUE}")
    return logical_id, template["Resources"][logical_id]["Properties"]


def _environment(stack: RunningStack, function: FunctionName) -> dict[str, Any]:
    template = stack.template()
    prefix = f"{API}{function.construct_id}Function"
    logical_id = _logical_id(template, "AWS::Lambda::Function", prefix)
    variables: dict[str, Any] = template["Resources"][logical_id]["Properties"]["Environment"]["Variables"]
    return variables


def _local_redrive(stack: RunningStack) -> dict[str, Any]:
    logical_id, _ = _jobs_queue(stack)
    attributes = stack.aws("sqs").get_queue_attributes(
        QueueUrl=stack.state["queues"][logical_id], AttributeNames=["RedrivePolicy"]
    )["Attributes"]
    policy: dict[str, Any] = json.loads(attributes["RedrivePolicy"])
    return policy


# --- the template, and the local resources built from it -------------------------------------------


def test_each_stack_was_synthesized_with_its_own_settings(
    stack: RunningStack, settings_stack: RunningStack
) -> None:
    default, changed = (
        _environment(stack, FunctionName.SUBMIT),
        _environment(settings_stack, FunctionName.SUBMIT),
    )
    assert (default["SUBMITS_PER_MINUTE"], changed["SUBMITS_PER_MINUTE"]) == ("60", str(SUBMITS_PER_MINUTE))
    assert (default["MAX_ATTEMPTS"], changed["MAX_ATTEMPTS"]) == ("3", str(MAX_ATTEMPTS))
    _, default_queue = _jobs_queue(stack)
    _, changed_queue = _jobs_queue(settings_stack)
    # maxReceiveCount = maxAttempts + 3 (DESIGN.md, "Delivery and execution").
    assert default_queue["RedrivePolicy"]["maxReceiveCount"] == 6
    assert changed_queue["RedrivePolicy"]["maxReceiveCount"] == MAX_ATTEMPTS + 3


def test_the_local_queue_has_the_templates_redrive_policy(
    stack: RunningStack, settings_stack: RunningStack
) -> None:
    for running, expected in ((stack, 6), (settings_stack, MAX_ATTEMPTS + 3)):
        policy = _local_redrive(running)
        assert int(policy["maxReceiveCount"]) == expected
        dlq_id = _logical_id(running.template(), "AWS::SQS::Queue", f"{OUTBOX}{JOBS_DLQ}")
        dlq_name = running.state["queues"][dlq_id].rsplit("/", 1)[-1]
        assert policy["deadLetterTargetArn"].endswith(f":{dlq_name}")


def test_retry_after_follows_poll_after_seconds(stack: RunningStack, settings_stack: RunningStack) -> None:
    for running, expected in ((stack, 2), (settings_stack, POLL_AFTER_SECONDS)):
        token = running.token(unique("settings-poll"))
        answer = running.submit(token, _summarize(f"{unique('poll')}. [[delay:2]]"))
        assert answer.status == 202
        assert assert_retry_after(answer) == expected
        status = running.call("GET", answer.headers["location"], token=token)
        assert assert_retry_after(status) == expected


# --- the submit rate ----------------------------------------------------------------------------


def _burst(stack: RunningStack, count: int) -> tuple[str, list[Answer]]:
    """`count` submits of one new owner inside one calendar minute (the counter's window)."""
    for _ in range(3):
        now = datetime.now(UTC)
        if now.second >= 50:  # too close to the next window: start in it instead
            time.sleep(60.5 - now.second - now.microsecond / 1e6)
        minute = datetime.now(UTC).replace(second=0, microsecond=0)
        token = stack.token(unique("settings-rate"))
        answers = [stack.submit(token, _summarize(unique("rate"))) for _ in range(count)]
        if datetime.now(UTC).replace(second=0, microsecond=0) == minute:
            return token, answers
    raise AssertionError("could not keep a burst of submits inside one minute")


def test_over_submits_per_minute_is_429_with_retry_after(settings_stack: RunningStack) -> None:
    token, answers = _burst(settings_stack, SUBMITS_PER_MINUTE + 1)
    assert [a.status for a in answers] == [202] * SUBMITS_PER_MINUTE + [429], [a.raw for a in answers]
    refused = answers[-1]
    assert_problem(refused, 429, "rate_limited")
    assert 1 <= assert_retry_after(refused) <= 60
    listed = settings_stack.call("GET", "/v1/jobs", token=token).body["items"]
    assert {item["jobId"] for item in listed} == {a.body["jobId"] for a in answers[:-1]}
    # Another owner has a budget of its own.
    other = settings_stack.submit(settings_stack.token(unique("settings-rate")), _summarize(unique("rate")))
    assert other.status == 202


# --- maxAttempts and a Pending cancel --------------------------------------------------------------


def test_a_failing_job_gives_up_after_max_attempts_of_this_stack(settings_stack: RunningStack) -> None:
    token = settings_stack.token(unique("settings-attempts"))
    text = f"{unique('busy')}. [[fault:rate_limit*5]]"
    job_id = settings_stack.submit(token, _summarize(text)).body["jobId"]
    document = settings_stack.wait_terminal(job_id, token)
    assert_status_document(document, job_id)
    assert document["status"] == "Failed"
    assert document["error"]["code"] == "retries_exhausted"
    assert document["attempts"] == MAX_ATTEMPTS
    calls = settings_stack.model_calls(request_hash("summarize", text), at_least=MAX_ATTEMPTS)
    assert [call["status"] for call in calls] == [429] * MAX_ATTEMPTS


def _wait_backing_off(stack: RunningStack, job_id: str, token: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        document: dict[str, Any] = stack.call("GET", f"/v1/jobs/{job_id}", token=token).body
        if document["status"] == "Pending" and document["attempts"] == 1:
            return document
        assert document["status"] in {"Pending", "Running"}, document
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never went back to Pending")


def _wait_queue_drained(stack: RunningStack) -> None:
    logical_id, _ = _jobs_queue(stack)
    sqs, url = stack.aws("sqs"), stack.state["queues"][logical_id]
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        if all(attributes.get(name) == "0" for name in names):
            return
        time.sleep(0.5)
    raise AssertionError("the jobs queue never drained")


def test_cancel_of_a_pending_job_is_200_canceled_and_it_never_runs_again(
    settings_stack: RunningStack,
) -> None:
    token = settings_stack.token(unique("settings-cancel"))
    text = f"{unique('backoff')}. [[fault:rate_limit*1]]"
    job_id = settings_stack.submit(token, _summarize(text)).body["jobId"]
    _wait_backing_off(settings_stack, job_id, token)

    answer = settings_stack.call("POST", f"/v1/jobs/{job_id}/cancellation", token=token)
    assert answer.status == 200, answer.raw
    assert answer.body["status"] == "Canceled"
    assert answer.body["cancelRequestedAt"] is not None
    assert "retry-after" not in answer.headers
    assert_status_document(answer.body, job_id)

    # Its message comes back once the backoff is over; the worker must drop it, not call the model.
    _wait_queue_drained(settings_stack)
    document = settings_stack.call("GET", f"/v1/jobs/{job_id}", token=token).body
    assert document == answer.body
    assert len(settings_stack.model_calls(request_hash("summarize", text), at_least=1)) == 1


# --- a clean stop (keep last: it stops the module's stack) ------------------------------------------


def test_stopping_the_stack_leaves_nothing_behind(settings_stack: RunningStack) -> None:
    children = descendants(settings_stack.process.pid)
    assert len(children) >= 2, children  # moto and at least one function process
    ports = [port_of(settings_stack.state[name]) for name in ("apiUrl", "awsEndpoint", "modelUrl")]
    assert all(accepts_connections(port) for port in ports)

    stop_stack(settings_stack)

    assert settings_stack.process.returncode == 0  # stopped by Ctrl-C, not killed after a timeout
    assert not state_path(settings_stack.port).exists()
    assert [port for port in ports if accepts_connections(port)] == []
    assert still_running(children) == []
