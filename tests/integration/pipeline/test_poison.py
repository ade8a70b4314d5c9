"""Poison messages: parked on the DLQ by the worker at once, or by the redrive policy after a crash loop."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from functions.worker.service import JobWorker
from shared.ports import Lane
from tests.support.faults import InjectedFaultError
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.integration

REDRIVE_MAX_RECEIVES = 6  # maxReceiveCount = MAX_ATTEMPTS + 3 (conftest)


def test_unparseable_and_unknown_job_messages_go_to_the_dlq_at_once(pipeline: Pipeline) -> None:
    # Given a garbage body and a well-formed message naming a job that does not exist
    garbage = "this is not a job message {"
    unknown_id = str(uuid.uuid4())
    unknown = json.dumps({"jobId": unknown_id, "traceId": "trace-1"})
    pipeline.send_raw(garbage)
    pipeline.send_raw(unknown)
    invocations = pipeline.spy_worker()

    # When the worker is polled until the jobs queue is empty
    pipeline.pump(lambda: pipeline.queue_depth(pipeline.queues.jobs_url) == 0)

    # Then each message was delivered once and reported as a success (no redelivery)
    delivered = sorted(body for invocation in invocations for body in invocation.bodies)
    assert delivered == sorted([garbage, unknown])
    assert all(invocation.failures == [] for invocation in invocations)
    # ... and the worker parked both on the DLQ itself, with the reason
    parked = {m["Body"]: m["MessageAttributes"] for m in pipeline.drain(pipeline.queues.dlq_url)}
    assert set(parked) == {garbage, unknown}
    assert parked[garbage]["reason"]["StringValue"] == "unparseable"
    assert "jobId" not in parked[garbage]
    assert parked[unknown]["reason"]["StringValue"] == "unknown_job"
    assert parked[unknown]["jobId"]["StringValue"] == unknown_id
    assert pipeline.model_calls() == []


def test_a_message_that_keeps_crashing_the_worker_is_redriven_to_the_dlq(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash loop is caught by the queue's redrive policy, not by the worker. The visibility is
    cut to 1 s so that the six receives take seconds rather than half a minute; the redrive
    counts receives, not time."""
    # Given a real job whose message crashes the worker on every delivery, before any claim
    job_id = pipeline.submit({"operation": "summarize", "input": {"text": "Crash."}}, key="loop")["body"][
        "jobId"
    ]
    original = JobWorker.handle

    async def crashing(self: JobWorker, body: str, lane: Lane) -> Any:
        if job_id in body:
            raise InjectedFaultError("this message always kills the worker")
        return await original(self, body, lane)

    monkeypatch.setattr(JobWorker, "handle", crashing)
    pipeline.set_jobs_visibility(1)
    invocations = pipeline.spy_worker()

    # When the pipeline runs (without the sweeper) until the message left the jobs queue
    pipeline.pump(
        lambda: (
            pipeline.queue_depth(pipeline.queues.jobs_url) == 0
            and pipeline.queue_depth(pipeline.queues.dlq_url) == 1
        ),
        timeout_seconds=45,
    )

    # Then it was received maxReceiveCount times, each a reported failure, then moved to the DLQ
    assert len(invocations) == REDRIVE_MAX_RECEIVES
    assert all(len(invocation.failures) == 1 for invocation in invocations)
    [dead] = pipeline.drain(pipeline.queues.dlq_url)
    assert json.loads(dead["Body"])["jobId"] == job_id
    assert "reason" not in dead.get("MessageAttributes", {})  # moved by SQS, not parked by the worker
    # ... and the job itself was never claimed
    status = pipeline.status(job_id)
    assert (status["status"], status["attempts"]) == ("Pending", 0)
    assert pipeline.model_calls() == []
