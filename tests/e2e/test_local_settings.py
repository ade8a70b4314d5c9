"""Local mode follows the CDK app: a second stack, synthesized with other context values, behaves
by them with no other edit. Also what only a stack of its own can show: the submit rate's 429
(3 a minute here instead of 60) and the retry of a refused submit, a cancel that certainly finds
its job Pending, worker crashes (its processes are killed, which would disturb other tests' jobs
on the shared stack) up to a job failed by the sweeper, and a clean stop.

The Pending cancel: over HTTP alone, a fresh job's claim races the cancel (the worker takes it
within a second or two). A job backing off after a rate limit is Pending until its `dispatchAt`,
but locally the backoff is 1 s. This stack raises the worker's backoff base with
`outlast local up --env` (local policy, not CDK context, sets it locally), so a job that failed
its first attempt stays Pending for BACKOFF_BASE_SECONDS / 2 at least: seconds, not milliseconds.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from infra.names import API, JOBS_DLQ, JOBS_QUEUE, OUTBOX, FunctionName
from outlast.local.stack import state_path
from outlast.operator.targets import local_target
from shared.payload_reads import input_of
from tests.e2e.conftest import E2E_CONTEXT, stop_without_denials
from tests.support.local_stack import (
    PROJECT_ROOT,
    Answer,
    RunningStack,
    accepts_connections,
    assert_problem,
    assert_retry_after,
    assert_status_document,
    assert_unchanged,
    descendants,
    function_processes,
    new_key,
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
BACKOFF_BASE_SECONDS = 8
# Locally 5 s; longer here, so that two slow calls are surely in flight together at a crash.
PROVIDER_TIMEOUT_SECONDS = 20


@pytest.fixture(scope="module")
def settings_stack(request: pytest.FixtureRequest) -> Iterator[RunningStack]:
    running = start_stack(
        PROJECT_ROOT / "cdk.out.e2e-settings",
        SETTINGS_CONTEXT,
        [
            "--schedule-seconds",
            "2",
            "--env",
            f"BACKOFF_BASE_SECONDS={BACKOFF_BASE_SECONDS}",
            "--env",
            f"PROVIDER_TIMEOUT_SECONDS={PROVIDER_TIMEOUT_SECONDS}",
        ],
    )
    yield running
    stop_without_denials(request, running, "the settings stack")


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


def _burst(stack: RunningStack, count: int, keys: list[str] | None = None) -> tuple[str, list[Answer]]:
    """`count` submits of one new owner inside one calendar minute (the counter's window), with
    the given Idempotency-Keys (fresh ones by default)."""
    for _ in range(3):
        now = datetime.now(UTC)
        if now.second >= 50:  # too close to the next window: start in it instead
            time.sleep(60.5 - now.second - now.microsecond / 1e6)
        minute = datetime.now(UTC).replace(second=0, microsecond=0)
        token = stack.token(unique("settings-rate"))
        answers = [
            stack.submit(token, _summarize(unique("rate")), key=keys[n] if keys else None)
            for n in range(count)
        ]
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


def test_a_submit_refused_at_the_rate_limit_leaves_no_claim_behind_and_its_retry_starts_fresh(
    settings_stack: RunningStack,
) -> None:
    """A 429 deletes the submit's own idempotency claim (a conditional DeleteItem): retried with
    the same key in the same minute it is refused again, not replayed; once the minute is over the
    retry is a new submit, 202 and no replay of anything."""
    # Given a full minute, and one more submit refused with its key
    keys = [new_key() for _ in range(SUBMITS_PER_MINUTE + 1)]
    token, answers = _burst(settings_stack, SUBMITS_PER_MINUTE + 1, keys)
    assert_problem(answers[-1], 429, "rate_limited")

    # When the refused submit is retried with its key until the owner's minute is over
    deadline = time.monotonic() + 75
    while True:
        retry = settings_stack.submit(token, _summarize(unique("rate")), key=keys[-1])
        if retry.status != 429 or time.monotonic() > deadline:
            break
        assert_problem(retry, 429, "rate_limited")
        time.sleep(1)

    # Then it is accepted as a submit of its own: nothing of the refused one was left to replay
    assert retry.status == 202, retry.raw
    assert "idempotent-replayed" not in retry.headers
    assert retry.body["jobId"] not in {a.body["jobId"] for a in answers[:-1]}


# --- maxAttempts and a Pending cancel --------------------------------------------------------------


@dataclass(frozen=True)
class BackingOff:
    """A job that is always rate limited, and one rate limited once, submitted together."""

    token: str
    exhausting: str
    exhausting_text: str
    canceled: str
    canceled_text: str


@pytest.fixture(scope="module")
def backing_off(settings_stack: RunningStack) -> BackingOff:
    """Both jobs spend their backoff at the same time, so their two tests share the wait."""
    token = settings_stack.token(unique("settings-backoff"))
    exhausting_text = f"{unique('busy')}. [[fault:rate_limit*5]]"
    canceled_text = f"{unique('backoff')}. [[fault:rate_limit*1]]"
    exhausting, canceled = (
        settings_stack.submit(token, _summarize(text)).body["jobId"]
        for text in (exhausting_text, canceled_text)
    )
    return BackingOff(token, exhausting, exhausting_text, canceled, canceled_text)


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
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        if all(attributes.get(name) == "0" for name in names):
            return
        time.sleep(0.5)
    raise AssertionError("the jobs queue never drained")


def test_cancel_of_a_pending_job_is_200_canceled_and_it_never_runs_again(
    settings_stack: RunningStack, backing_off: BackingOff
) -> None:
    token, job_id = backing_off.token, backing_off.canceled
    _wait_backing_off(settings_stack, job_id, token)

    answer = settings_stack.call("POST", f"/v1/jobs/{job_id}/cancellation", token=token)
    assert answer.status == 200, answer.raw
    assert answer.body["status"] == "Canceled"
    assert answer.body["attempts"] == 1
    assert answer.body["cancelRequestedAt"] is not None
    assert "retry-after" not in answer.headers
    assert_status_document(answer.body, job_id)

    # Its message comes back once the backoff is over; the worker must drop it, not call the model.
    _wait_queue_drained(settings_stack)
    document = settings_stack.call("GET", f"/v1/jobs/{job_id}", token=token).body
    assert_unchanged(document, answer.body)
    calls = settings_stack.model_calls(request_hash("summarize", backing_off.canceled_text), at_least=1)
    assert len(calls) == 1


def test_a_failing_job_gives_up_after_max_attempts_of_this_stack(
    settings_stack: RunningStack, backing_off: BackingOff
) -> None:
    job_id = backing_off.exhausting
    document = settings_stack.wait_terminal(job_id, backing_off.token)
    assert_status_document(document, job_id)
    assert document["status"] == "Failed"
    assert document["error"]["code"] == "retries_exhausted"
    assert document["attempts"] == MAX_ATTEMPTS
    text_hash = request_hash("summarize", backing_off.exhausting_text)
    calls = settings_stack.model_calls(text_hash, at_least=MAX_ATTEMPTS)
    assert [call["status"] for call in calls] == [429] * MAX_ATTEMPTS


def test_after_a_worker_crash_the_sweeper_reruns_one_job_and_finishes_a_cancel(
    settings_stack: RunningStack,
) -> None:
    """A crash, not an error: the worker writes nothing more. Once the lease (5 s here) expires,
    the sweeper puts a Running job back to Pending and re-sends it (the next attempt finishes it),
    and ends a CancellationRequested job as Canceled, since no lease holder is left to do it."""
    token = settings_stack.token(unique("settings-crash"))
    # Slow enough to be in flight together, well under this stack's provider timeout.
    rerun, cancel = (
        settings_stack.submit(token, _summarize(f"{unique('crash')}. [[delay:6]]")).body["jobId"]
        for _ in range(2)
    )
    for job_id in (rerun, cancel):
        settings_stack.wait_status(job_id, token, "Running")
    workers = function_processes(settings_stack, FunctionName.WORKER.handler)
    assert workers
    for pid in workers:  # processes of the stack this module started
        os.kill(pid, signal.SIGKILL)

    # At once, while the dead worker's lease (renewed every second until the crash) still holds:
    # nobody acts on the request, so asking again is 202 too, with the first request's time.
    requested = settings_stack.call("POST", f"/v1/jobs/{cancel}/cancellation", token=token)
    again = settings_stack.call("POST", f"/v1/jobs/{cancel}/cancellation", token=token)
    assert (requested.status, again.status) == (202, 202), (requested.raw, again.raw)
    assert requested.body["status"] == again.body["status"] == "CancellationRequested"
    assert again.body["cancelRequestedAt"] == requested.body["cancelRequestedAt"]
    assert_retry_after(again)
    in_flight = settings_stack.call("GET", f"/v1/jobs/{rerun}", token=token).body
    assert in_flight["status"] in {"Running", "Pending"}, f"precondition: in flight at the crash, {in_flight}"

    canceled = settings_stack.wait_terminal(cancel, token)
    assert canceled["status"] == "Canceled", canceled
    assert canceled["attempts"] == 1
    assert canceled["cancelRequestedAt"] == requested.body["cancelRequestedAt"]
    document = settings_stack.wait_terminal(rerun, token)
    assert document["status"] == "Succeeded", document
    assert document["attempts"] == 2
    assert settings_stack.call("GET", f"/v1/jobs/{rerun}/result", token=token).status == 200


def test_a_job_that_crashes_every_worker_fails_and_keeps_its_input_for_a_redrive(
    settings_stack: RunningStack,
) -> None:
    """The sweeper fails a job that crashed maxCrashes (2) workers it ran alone on. Its small input
    rides in the job item, which the terminal write clears, so the sweeper first copies it to an
    item of its own for an operator's redrive (a PutItem on the jobs table) and records where."""
    token = settings_stack.token(unique("settings-crashes"))
    text = f"{unique('crashes')}. [[delay:6]]"
    job_id = settings_stack.submit(token, _summarize(text)).body["jobId"]

    # When every worker that runs it is killed mid-call (once per claim)
    killed: set[int] = set()
    deadline = time.monotonic() + 180
    while (document := settings_stack.call("GET", f"/v1/jobs/{job_id}", token=token).body)["status"] not in {
        "Succeeded",
        "Failed",
        "Canceled",
    }:
        assert time.monotonic() < deadline, f"still {document['status']} after {len(killed)} crashes"
        if document["status"] == "Running" and document["attempts"] not in killed:
            killed.add(document["attempts"])
            for pid in function_processes(settings_stack, FunctionName.WORKER.handler):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)

    # Then it failed for the crashes, and its input was kept where a redrive finds it
    assert document["status"] == "Failed", document
    assert document["error"]["code"] == "worker_crashed", document
    target = local_target(settings_stack.port)
    job = target.repository.get_job(job_id)
    assert job is not None
    assert job.input_location == "item"
    kept = input_of(job, target.payloads)
    assert kept is not None
    assert kept.text == text


# --- a clean stop (keep last: it stops the module's stack) ------------------------------------------


def test_stopping_the_stack_leaves_nothing_behind(settings_stack: RunningStack) -> None:
    children = descendants(settings_stack.process.pid)
    assert len(children) >= 2, children  # moto and at least one function process
    ports = [port_of(settings_stack.state[name]) for name in ("apiUrl", "awsEndpoint", "modelUrl")]
    assert all(accepts_connections(port) for port in ports)

    # Cleanliness, not speed, is the point here: a loaded machine may take a while (never killed early).
    stop_stack(settings_stack, timeout_seconds=180)

    assert settings_stack.process.returncode == 0  # it exited on Ctrl-C, nobody had to kill it
    assert not state_path(settings_stack.port).exists()
    assert [port for port in ports if accepts_connections(port)] == []
    assert still_running(children) == []
