"""Crashes between writes: a worker dying after its claim or after the model answered, a dead relay.

Faults are injected by patching one method to raise once (tests.support.faults), as a Lambda
that dies mid-invocation would: the batch fails, nothing is deleted, and recovery is left to
SQS redelivery and the sweeper.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import functions.relay.handler
from functions.worker.service import JobWorker
from shared.job_errors import ERROR_MESSAGES
from tests.support.faults import InjectedFaultError, fail_once
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.integration

BODY = {"operation": "summarize", "input": {"text": "The worker died. The sweeper brought the job back."}}


def test_a_worker_crash_after_the_claim_is_recovered_by_the_sweeper(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claimed, then the invocation dies before the model call: the lease runs out and the sweeper
    puts the job back. The redelivered message never starts a second run: the job is Running."""
    # Given a worker that dies right after its first successful claim, and a 1 s visibility so the
    # crashed delivery comes back while the 2 s lease still holds the job
    executions = fail_once(monkeypatch, JobWorker, "_execute")
    pipeline.set_jobs_visibility(1)
    job_id = pipeline.submit(BODY, key="crash-after-claim")["body"]["jobId"]

    # When the first delivery is worked: claimed, then the crash
    pipeline.pump(lambda: len(executions) == 1)

    # Then the job is Running under the dead worker's lease and its message stays on the queue
    crashed = pipeline.status(job_id)
    assert (crashed["status"], crashed["attempts"]) == ("Running", 1)
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == 1

    # When the message comes back (no sweeper yet)
    pipeline.pump(lambda: pipeline.queue_depth(pipeline.queues.jobs_url) == 0)

    # Then the redelivery found the job Running and dropped it: no second claim, no model call
    dropped = pipeline.status(job_id)
    assert (dropped["status"], dropped["attempts"]) == ("Running", 1)
    assert len(executions) == 1
    assert pipeline.model_calls() == []

    # When the sweeper runs too: the lease expires, the job goes back to Pending and is re-sent
    [final] = pipeline.terminal(job_id, sweep=True)

    # Then the second claim finished the job with the only model call
    assert final["status"] == "Succeeded"
    assert final["attempts"] == 2
    assert final["error"] is None
    assert len(executions) == 2
    assert len(pipeline.model_calls()) == 1
    assert pipeline.result(job_id)["statusCode"] == 200


@pytest.mark.parametrize(
    "crash_point",
    [
        pytest.param("_succeed", id="before-the-result-write"),
        pytest.param("_terminal", id="after-the-result-before-the-status-write"),
    ],
)
def test_a_crash_after_the_model_answered_costs_one_more_model_call(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, crash_point: str
) -> None:
    """The model answered but the worker died before recording Succeeded. The answer is lost with
    the invocation, so the retry calls the model again: 2 model calls for 1 result, never a
    Succeeded job without its result."""
    # Given a worker that dies once between the model's answer and the terminal write
    crashes = fail_once(monkeypatch, JobWorker, crash_point)
    job_id = pipeline.submit(BODY, key=f"crash-{crash_point}")["body"]["jobId"]

    # When the pipeline runs with the sweeper (which expires the dead worker's lease)
    [final] = pipeline.terminal(job_id, sweep=True)

    # Then the job completed on its second claim, at the cost of a second model call
    assert len(crashes) == 2
    assert final["status"] == "Succeeded"
    assert final["attempts"] == 2
    calls = pipeline.model_calls()
    assert [c["outcome"] for c in calls] == ["ok", "ok"]
    assert calls[0]["requestHash"] == calls[1]["requestHash"]
    result = pipeline.result(job_id)
    assert result["statusCode"] == 200
    assert result["body"]["output"]
    assert final["usage"] is not None


def test_a_job_whose_relay_keeps_failing_is_dispatched_by_the_sweeper(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a relay function that fails on every invocation (the job item is already written)
    relay_attempts: list[int] = []

    def broken_relay(*_: Any) -> dict[str, Any]:
        relay_attempts.append(1)
        raise InjectedFaultError("relay down")

    monkeypatch.setattr(functions.relay.handler, "relay_records", broken_relay)
    job_id = pipeline.submit(BODY, key="relay-down")["body"]["jobId"]

    # When the stream mapping retries until it gives up (no sweeper yet)
    pipeline.pump(lambda: pipeline.queue_depth(pipeline.queues.relay_failures_url) == 1)

    # Then nothing was dispatched: the job waits, Pending, and the failure is on record
    assert len(relay_attempts) == 1 + pipeline.relay.max_retries
    assert pipeline.status(job_id)["status"] == "Pending"
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == 0
    [failure] = pipeline.drain(pipeline.queues.relay_failures_url)
    info = json.loads(failure["Body"])
    assert info["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert info["DDBStreamBatchInfo"]["batchSize"] == 1
    assert pipeline.model_calls() == []

    # When the sweeper runs: past DISPATCH_GRACE_SECONDS it re-sends the job itself
    pipeline.wait_for(lambda: job_id in pipeline.sweep()["jobIds"])

    # Then it re-sent exactly one message, and a sweep right after sends no second one
    assert job_id not in pipeline.sweep()["jobIds"]
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == 1
    [final] = pipeline.terminal(job_id, sweep=True)

    # Then the job succeeded on its first claim, with the relay still down throughout
    assert final["status"] == "Succeeded"
    assert final["attempts"] == 1
    assert len(pipeline.model_calls()) == 1
    assert len(relay_attempts) == 1 + pipeline.relay.max_retries


def test_a_job_whose_worker_always_dies_fails_after_its_last_attempt(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every claim ends in a crash: the sweeper puts the job back twice, then fails it. Each claim
    counted, no model call was ever made, and the error is the documented one."""
    # Given a worker that dies after every claim of this job
    claims: list[int] = []

    async def crash(self: JobWorker, *_: Any) -> None:
        claims.append(1)
        raise InjectedFaultError("the worker dies after every claim")

    monkeypatch.setattr(JobWorker, "_execute", crash)
    job_id = pipeline.submit(BODY, key="always-dies")["body"]["jobId"]

    # When the pipeline runs with the sweeper until the job ends
    [final], history = pipeline.terminal_with_history(job_id, sweep=True)

    # Then it failed as retries_exhausted after MAX_ATTEMPTS claims, with no model call
    assert final["status"] == "Failed"
    assert final["attempts"] == 3
    assert len(claims) == 3
    assert final["error"] == {"code": "retries_exhausted", "message": ERROR_MESSAGES["retries_exhausted"]}
    assert {d["status"] for d in history} <= {"Pending", "Running", "Failed"}
    assert pipeline.model_calls() == []
