"""Crash isolation: a job never fails because another job crashed the worker it shared (DESIGN.md,
"Lifecycle"). The crash is a real one for the invocation: the culprit raises WorkerCrash, which
nothing in the function catches, so the whole batch fails as when a runtime dies, leases held."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from functions.worker.service import JobWorker
from outlast.local.model_server import ModelServer
from shared.job_errors import ERROR_MESSAGES
from tests.support.faults import WorkerCrash
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.integration

BATCH = 10
KILLER = "[[kill-the-worker]]"


def test_one_job_that_kills_every_worker_fails_alone_and_the_other_nine_succeed(
    patient_pipeline: Pipeline, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Model calls spent, exactly: the culprit makes none (it kills the worker before its call, each
    time). Each of the nine others makes two: one in the crashed batch (in flight when the worker
    died, never answered) and one when it runs again alone from the isolation queue. So 18 calls
    for 9 results; before crash isolation, the crash charged every job an attempt and a job that
    met the culprit three times failed with retries_exhausted."""
    pipeline = patient_pipeline
    # Given a worker that dies whenever the culprit is about to call the model: in the shared batch
    # only once the nine other calls are in flight, so that every batch-mate loses one answer
    original = JobWorker._call_under_lease
    culprit_runs: list[bool] = []

    async def deadly(self: JobWorker, run: Any, request: Any) -> Any:
        text = request.messages[-1]["content"]
        if KILLER in text:
            culprit_runs.append(self._solo)
            deadline = time.monotonic() + 30  # a guard against hanging, not a threshold
            while not self._solo and model_server.in_flight < BATCH - 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            raise WorkerCrash("the culprit takes the whole invocation down")
        return await original(self, run, request)

    monkeypatch.setattr(JobWorker, "_call_under_lease", deadly)
    # ... and ten accepted jobs, the culprit among them, relayed together
    job_ids = [
        pipeline.submit(
            {
                "operation": "summarize",
                # Each harmless job's first call stalls until the client gives up: it is surely in
                # flight when the worker dies; its later calls are answered at once.
                "input": {"text": f"Report {n}. {KILLER if n == 3 else 'Harmless. [[fault:timeout*1]]'}"},
            },
            key=f"isolation-{n}",
        )["body"]["jobId"]
        for n in range(BATCH)
    ]
    culprit = job_ids[3]
    assert pipeline.relay.poll() == BATCH
    pipeline.worker.batching_window_seconds = 2
    invocations = pipeline.spy_worker()

    # When the first invocation takes all ten and dies
    assert pipeline.worker.poll() == BATCH
    [crashed] = invocations
    assert len(crashed.bodies) == BATCH

    # ... and the pipeline runs with the sweeper until every job has ended
    finals = pipeline.terminal(*job_ids, sweep=True, timeout_seconds=120)

    # Then the nine others succeeded, isolated but at no cost to their attempts
    others = [final for final, job_id in zip(finals, job_ids, strict=True) if job_id != culprit]
    assert [(f["status"], f["crashes"], f["error"]) for f in others] == [("Succeeded", 0, None)] * 9
    # ... and the culprit failed on its own: once in the batch (not counted), twice alone (counted)
    [failed] = [final for final in finals if final["jobId"] == culprit]
    assert failed["status"] == "Failed"
    assert failed["error"] == {"code": "worker_crashed", "message": ERROR_MESSAGES["worker_crashed"]}
    assert (failed["attempts"], failed["crashes"]) == (3, 2)
    assert culprit_runs == [False, True, True]

    # When the messages still queued are worked off too: the crashed batch's own, back on the
    # shared queue, and the sweeper's re-sends of isolated jobs that waited past their grace
    def drained() -> bool:
        return (
            pipeline.queue_depth(pipeline.queues.jobs_url)
            == pipeline.queue_depth(pipeline.queues.isolation_url)
            == 0
        )

    pipeline.pump(drained, timeout_seconds=60)

    # Then every isolation-queue invocation held one job, and the stale copies were dropped
    lanes = [invocation.event["Records"][0]["eventSourceARN"] for invocation in invocations[1:]]
    alone = [
        i for i, lane in zip(invocations[1:], lanes, strict=True) if lane == pipeline.queues.isolation_arn
    ]
    assert len(alone) >= BATCH + 1  # nine reruns and the culprit's two solo runs, at least
    assert all(len(invocation.bodies) == 1 for invocation in alone)
    # ... at the model-call cost the docstring states: 18 calls, none of them the culprit's, none
    # for a stale copy
    pipeline.wait_for(lambda: model_server.in_flight == 0)
    calls = Counter(call["requestHash"] for call in pipeline.model_calls())
    assert sorted(calls.values()) == [2] * 9
    assert sum(calls.values()) == 18
