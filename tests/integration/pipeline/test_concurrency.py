"""One invocation runs its batch concurrently, and hands jobs back (never fails them) near its timeout."""

from __future__ import annotations

import pytest

from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.integration

BATCH = 10


def test_a_batch_of_ten_slow_jobs_runs_concurrently_in_one_invocation(patient_pipeline: Pipeline) -> None:
    pipeline = patient_pipeline
    # Given ten accepted jobs whose model calls take 2 s each, all relayed to the queue
    job_ids = [
        pipeline.submit(
            {"operation": "summarize", "input": {"text": f"Report {n} of the batch. [[delay:2]] Done."}},
            key=f"batch-{n}",
        )["body"]["jobId"]
        for n in range(BATCH)
    ]
    assert pipeline.relay.poll() == BATCH
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == BATCH
    # ... and a batching window wide enough to gather them all into one batch
    pipeline.worker.batching_window_seconds = 2
    invocations = pipeline.spy_worker()

    # When the worker is polled once
    received = pipeline.worker.poll()

    # Then one invocation took all ten and finished every one of them
    assert received == BATCH
    [invocation] = invocations
    assert len(invocation.bodies) == BATCH
    assert invocation.failures == []
    finals = [pipeline.status(job_id) for job_id in job_ids]
    assert [(f["status"], f["attempts"]) for f in finals] == [("Succeeded", 1)] * BATCH
    # ... with the ten model calls in flight together: the last started before the first finished
    calls = pipeline.model_calls()
    assert len(calls) == BATCH
    assert len({c["requestHash"] for c in calls}) == BATCH
    assert max(c["started"] for c in calls) < min(c["finished"] for c in calls)


def test_a_job_in_flight_near_the_timeout_is_released_not_failed(patient_pipeline: Pipeline) -> None:
    pipeline = patient_pipeline
    # Given a job whose model call takes 3 s, and a worker invoked with a 3.5 s timeout: with the
    # 2 s release margin, the invocation must hand the job back at most 1.5 s into the call
    job_id = pipeline.submit(
        {"operation": "summarize", "input": {"text": "A long read. [[delay:3]] The end."}}, key="release"
    )["body"]["jobId"]
    assert pipeline.relay.poll() == 1
    pipeline.set_worker_timeout(3.5)
    invocations = pipeline.spy_worker()

    # When that invocation works the job
    assert pipeline.worker.poll() == 1

    # Then the job went back to Pending, its attempt counted, no error, and a fresh message of it
    # took the place of the one it came with (deleted: no receive counts against the redrive policy)
    [released] = invocations
    assert released.failures == []
    after_release = pipeline.status(job_id)
    assert (after_release["status"], after_release["attempts"]) == ("Pending", 1)
    assert after_release["error"] is None
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == 1

    # When a later delivery runs with a normal timeout
    pipeline.set_worker_timeout(30)
    [final], history = pipeline.terminal_with_history(job_id)

    # Then the job completed on its second claim and never showed Failed
    assert final["status"] == "Succeeded"
    assert final["attempts"] == 2
    assert "Failed" not in {d["status"] for d in [after_release, *history]}
    # ... and both claims made their model call (the released one finishes on the server, unread)
    pipeline.wait_for(lambda: len(pipeline.model_calls()) == 2)
