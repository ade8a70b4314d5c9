"""At-least-once delivery: the same message delivered twice still makes exactly one model call."""

from __future__ import annotations

import json

import pytest

from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.integration

BODY = {"operation": "summarize", "input": {"text": "Deliveries repeat. The claim is conditional."}}


def _relayed_body(pipeline: Pipeline) -> str:
    """Relay the job's INSERT and return the one message body the relay sent."""
    assert pipeline.relay.poll() == 1
    [body] = pipeline.peek_bodies(pipeline.queues.jobs_url)
    return body


def test_a_duplicate_delivered_after_the_first_is_dropped(pipeline: Pipeline) -> None:
    # Given an accepted job whose message the relay sent, and a byte-identical duplicate behind it
    job_id = pipeline.submit(BODY, key="dup-sequential")["body"]["jobId"]
    body = _relayed_body(pipeline)
    pipeline.send_raw(body)
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == 2
    # ... delivered one at a time, so the duplicate arrives after the first delivery finished
    pipeline.worker.batch_size = 1
    invocations = pipeline.spy_worker()

    # When both deliveries are worked
    pipeline.pump(lambda: len(invocations) == 2 and pipeline.queue_depth(pipeline.queues.jobs_url) == 0)

    # Then each delivery ran in its own invocation, both were deleted, and the job ran once
    assert [i.bodies for i in invocations] == [[body], [body]]
    assert [i.failures for i in invocations] == [[], []]
    final = pipeline.status(job_id)
    assert final["status"] == "Succeeded"
    assert final["attempts"] == 1
    assert len(pipeline.model_calls()) == 1


def test_two_copies_in_one_batch_make_one_model_call(pipeline: Pipeline) -> None:
    # Given the relay's message and a byte-identical duplicate, both visible at once
    job_id = pipeline.submit(BODY, key="dup-batch")["body"]["jobId"]
    body = _relayed_body(pipeline)
    pipeline.send_raw(body)
    pipeline.worker.batching_window_seconds = 1
    invocations = pipeline.spy_worker()

    # When one worker poll gathers both and runs them concurrently in one invocation
    assert pipeline.worker.poll() == 2

    # Then one copy claimed the job, the other lost (no model call), and neither is redelivered
    [invocation] = invocations
    assert invocation.bodies == [body, body]
    assert invocation.failures == []
    final = pipeline.status(job_id)
    assert final["status"] == "Succeeded"
    assert final["attempts"] == 1
    assert len(pipeline.model_calls()) == 1
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == 0


def test_a_duplicate_arriving_during_the_backoff_waits_for_it(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job whose first call was rate limited: Pending, due only after a backoff of at
    # least 2 s (a 3 s base, equal jitter), so the copy below surely arrives early
    monkeypatch.setenv("BACKOFF_BASE_SECONDS", "3")
    job_id = pipeline.submit(
        {"operation": "summarize", "input": {"text": "Busy. [[fault:rate_limit*1]]"}}, key="dup-early"
    )["body"]["jobId"]
    pipeline.pump(lambda: len(pipeline.model_calls()) == 1 and pipeline.status(job_id)["status"] == "Pending")
    backing_off = pipeline.status(job_id)
    # ... and a copy of its message delivered at once, before the job is due
    pipeline.send_raw(json.dumps({"jobId": job_id, "traceId": "early-copy"}))
    invocations = pipeline.spy_worker()

    # When the pipeline runs on
    [final] = pipeline.terminal(job_id)

    # Then the early copy did not claim the job: it was sent again, delayed until the job is due
    # (a fresh message, so no receive is counted against the redrive policy), and deleted
    assert invocations[0].bodies == [json.dumps({"jobId": job_id, "traceId": "early-copy"})]
    assert invocations[0].failures == []
    # ... and the job ran once more when due: 2 claims, 2 model calls in all
    assert (backing_off["attempts"], final["status"], final["attempts"]) == (1, "Succeeded", 2)
    assert [c["outcome"] for c in pipeline.model_calls()] == ["rate_limit", "ok"]
