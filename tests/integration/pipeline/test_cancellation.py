"""Cancellation: a Pending job ends at once; a Running one is stopped by its lease holder."""

from __future__ import annotations

from typing import Any

import pytest

import functions.worker.terminal
import shared.retention
from functions.worker.service import JobWorker
from shared.job import BlobLocation
from tests.support.faults import fail_once
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.integration


def _body(text: str) -> dict[str, Any]:
    return {"operation": "summarize", "input": {"text": text}}


def test_a_pending_job_is_canceled_without_a_model_call(pipeline: Pipeline) -> None:
    # Given an accepted job that no worker has seen yet
    job_id = pipeline.submit(_body("Cancel me before anyone starts."), key="cancel-pending")["body"]["jobId"]

    # When the caller cancels it
    canceled = pipeline.cancel(job_id)

    # Then it is Canceled at once (200)
    assert canceled["statusCode"] == 200
    assert canceled["body"]["status"] == "Canceled"
    assert canceled["body"]["cancelRequestedAt"] is not None

    # When its message is relayed and delivered anyway
    assert pipeline.relay.poll() == 1
    pipeline.pump(lambda: pipeline.queue_depth(pipeline.queues.jobs_url) == 0)

    # Then the delivery was dropped: still Canceled, never claimed, no model call, no result
    final = pipeline.status(job_id)
    assert (final["status"], final["attempts"]) == ("Canceled", 0)
    assert pipeline.model_calls() == []
    result = pipeline.result(job_id)
    assert result["statusCode"] == 409
    assert result["body"]["code"] == "job_not_succeeded"


def test_a_running_job_is_canceled_by_its_lease_holder(patient_pipeline: Pipeline) -> None:
    pipeline = patient_pipeline
    # Given a job whose model call takes 3 s, being worked by an invocation on another thread
    job_id = pipeline.submit(_body("A slow document. [[delay:3]]"), key="cancel-running")["body"]["jobId"]
    assert pipeline.relay.poll() == 1
    invocation = pipeline.in_background(pipeline.worker.poll)
    pipeline.wait_for(lambda: pipeline.status(job_id)["status"] == "Running")

    # When the caller cancels it mid-call
    requested = pipeline.cancel(job_id)

    # Then the cancel is under way (202), and the worker stops at its next heartbeat
    assert requested["statusCode"] == 202
    assert requested["body"]["status"] == "CancellationRequested"
    invocation.join()
    [final] = pipeline.terminal(job_id)
    assert final["status"] == "Canceled"
    assert final["attempts"] == 1
    assert final["error"] is None
    assert final["resultUrl"] is None
    # The worker abandoned the call before it answered, so no usage was ever reported to keep
    assert final["usage"] is None
    result = pipeline.result(job_id)
    assert result["statusCode"] == 409
    assert result["body"]["code"] == "job_not_succeeded"
    # ... and the abandoned call was the only one: the server finishes it, nobody calls again
    pipeline.wait_for(lambda: len(pipeline.model_calls()) == 1)
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == 0


def test_a_cancel_that_lands_after_the_answer_wins_and_keeps_the_usage(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model answered, then the caller canceled before the worker's terminal write: Canceled
    wins, the output is dropped, and the tokens the call cost stay on the job."""
    job_id = pipeline.submit(_body("Cancel me at the last moment."), key="cancel-late")["body"]["jobId"]
    # Given a cancel request that arrives between the answer and the worker's terminal write
    # (the input's last expiry is set just before that write)
    end_input = shared.retention.end_input
    cancels: list[dict[str, Any]] = []

    def cancel_first(*args: Any) -> BlobLocation | None:
        if not cancels:
            cancels.append(pipeline.cancel(job_id))
        return end_input(*args)

    monkeypatch.setattr(functions.worker.terminal, "end_input", cancel_first)
    spied = pipeline.spy_worker()

    # When the job runs
    [final] = pipeline.terminal(job_id)

    # Then the cancel was accepted as under way and the lease holder finished it as Canceled
    assert [c["statusCode"] for c in cancels] == [202]
    assert final["status"] == "Canceled"
    assert final["attempts"] == 1
    assert final["resultUrl"] is None
    assert final["usage"] is not None
    assert final["usage"]["inputTokens"] > 0
    assert pipeline.result(job_id)["statusCode"] == 409
    assert len(pipeline.model_calls()) == 1
    assert [i.failures for i in spied] == [[]]


def test_a_job_canceled_during_its_backoff_is_never_called_again(pipeline: Pipeline) -> None:
    # Given a job whose first call was rate limited: Pending again, its message hidden for the backoff
    job_id = pipeline.submit(_body("Busy provider. [[fault:rate_limit*5]]"), key="cancel-backoff")["body"][
        "jobId"
    ]
    pipeline.pump(lambda: len(pipeline.model_calls()) == 1 and pipeline.status(job_id)["status"] == "Pending")

    # When the caller cancels it
    canceled = pipeline.cancel(job_id)

    # Then it is Canceled at once, and the delivery that comes back after the backoff is dropped
    assert canceled["statusCode"] == 200
    assert canceled["body"]["status"] == "Canceled"
    pipeline.pump(lambda: pipeline.queue_depth(pipeline.queues.jobs_url) == 0)
    final = pipeline.status(job_id)
    assert (final["status"], final["attempts"], final["error"]) == ("Canceled", 1, None)
    assert [c["outcome"] for c in pipeline.model_calls()] == ["rate_limit"]


def test_the_sweeper_finishes_a_cancel_whose_lease_holder_died(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a job whose worker died right after claiming it
    executions = fail_once(monkeypatch, JobWorker, "_execute")
    job_id = pipeline.submit(_body("Orphaned."), key="cancel-orphan")["body"]["jobId"]
    pipeline.pump(lambda: len(executions) == 1)

    # When the caller cancels it: a Running job is only asked to stop
    requested = pipeline.cancel(job_id)
    assert requested["statusCode"] == 202
    assert requested["body"]["status"] == "CancellationRequested"

    # Then, nobody holding it any more, the sweeper ends it once the lease expires
    [final] = pipeline.terminal(job_id, sweep=True)
    assert (final["status"], final["attempts"], final["error"]) == ("Canceled", 1, None)
    assert len(executions) == 1
    assert pipeline.model_calls() == []
    assert pipeline.cancel(job_id)["statusCode"] == 200
