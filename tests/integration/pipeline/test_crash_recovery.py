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
from functions.worker.terminal import TerminalWrites
from shared.job_errors import ERROR_MESSAGES
from tests.support.faults import InjectedFaultError, crash_once, fail_once
from tests.support.pipeline import Pipeline
from tests.support.storage import Storage

pytestmark = pytest.mark.integration

BODY = {"operation": "summarize", "input": {"text": "The worker died. The sweeper brought the job back."}}
# A summary too long to ride in the job item's terminal write: its result is an item of its own,
# written before the status (a short one goes with the status write and cannot be lost between).
LONG_ANSWER_BODY = {
    "operation": "summarize",
    "input": {"text": "Comprehensively documented interoperability considerations " * 20 + "matter."},
}


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


def test_a_crash_before_the_result_write_costs_one_more_model_call(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model answered but the worker died before storing it. The answer is lost with the
    invocation, so the retry calls the model again: 2 model calls for 1 result, never a
    Succeeded job without its result."""
    # Given a worker that dies once between the model's answer and the result write
    crashes = crash_once(monkeypatch, TerminalWrites, "succeed")
    job_id = pipeline.submit(BODY, key="crash-before-result")["body"]["jobId"]

    # When the pipeline runs with the sweeper (which expires the dead worker's lease)
    [final] = pipeline.terminal(job_id, sweep=True)

    # Then the job completed on its second claim, at the cost of a second model call
    assert len(crashes) == 2
    assert final["status"] == "Succeeded"
    assert (final["attempts"], final["crashes"]) == (2, 1)
    calls = pipeline.model_calls()
    assert [c["outcome"] for c in calls] == ["ok", "ok"]
    assert calls[0]["requestHash"] == calls[1]["requestHash"]
    result = pipeline.result(job_id)
    assert result["statusCode"] == 200
    assert result["body"]["output"]
    assert final["usage"] is not None


def test_a_crash_after_the_result_write_is_adopted_without_a_second_call(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The result (with its usage) was stored, then the worker died before the terminal write. The
    next claim adopts the stored result: one model call, and the job's usage is that call's."""
    # Given a worker that dies once after the result write, before the status write
    crashes = crash_once(monkeypatch, TerminalWrites, "terminal")
    job_id = pipeline.submit(LONG_ANSWER_BODY, key="crash-after-result")["body"]["jobId"]

    # When the pipeline runs with the sweeper
    [final] = pipeline.terminal(job_id, sweep=True)

    # Then the second claim finished the job from the stored result, with no second call
    assert len(crashes) == 2
    assert final["status"] == "Succeeded"
    assert final["attempts"] == 2
    [call] = pipeline.model_calls()
    assert call["outcome"] == "ok"
    # ...and the job's output and usage are the stored result's, together
    found = Storage(pipeline.resources).payloads().find_result(job_id)
    assert found is not None
    location, stored = found
    assert location == "item"
    assert stored.usage is not None
    result = pipeline.result(job_id)["body"]
    assert result["output"] == stored.output
    expected = {
        "inputTokens": stored.usage.input_tokens,
        "outputTokens": stored.usage.output_tokens,
        "estimated": False,
        "cachedInputTokens": 0,
        "tiers": ["standard"],
    }
    assert final["usage"] == result["usage"] == expected


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


def test_a_job_whose_worker_always_dies_alone_fails_as_worker_crashed(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every claim ends in a crash, and the job is alone in each invocation: each expired lease is
    its own doing. After maxCrashes (2) of them it fails with worker_crashed instead of taking
    down more workers; no model call was ever made."""
    # Given a worker that dies after every claim of this job
    claims: list[int] = []

    async def crash(self: JobWorker, *_: Any) -> None:
        claims.append(1)
        raise InjectedFaultError("the worker dies after every claim")

    monkeypatch.setattr(JobWorker, "_execute", crash)
    job_id = pipeline.submit(BODY, key="always-dies")["body"]["jobId"]

    # When the pipeline runs with the sweeper until the job ends
    [final], history = pipeline.terminal_with_history(job_id, sweep=True)

    # Then it failed as worker_crashed after two solo runs, with no model call
    assert final["status"] == "Failed"
    assert (final["attempts"], final["crashes"]) == (2, 2)
    assert len(claims) == 2
    assert final["error"] == {"code": "worker_crashed", "message": ERROR_MESSAGES["worker_crashed"]}
    assert {d["status"] for d in history} <= {"Pending", "Running", "Failed"}
    assert pipeline.model_calls() == []
