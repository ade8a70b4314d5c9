"""Leases: whoever lost a job can never write to it again; heartbeats keep a long call's job its own."""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta
from typing import Any

import boto3
import pytest

from functions.sweeper.dependencies import build_dependencies
from functions.sweeper.service import sweep
from functions.sweeper.settings import SweeperSettings
from functions.worker.dependencies import build_dependencies as build_worker_dependencies
from functions.worker.settings import WorkerSettings
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.payloads import DynamoS3PayloadStore
from shared.job import JobError, JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.ports import JobRepository, Lease, Transition, TransitionConflictError
from tests.support import jobs
from tests.support.aws import REGION
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.integration


def _repository(pipeline: Pipeline) -> DynamoJobRepository:
    client = boto3.client("dynamodb", endpoint_url=pipeline.endpoint, region_name=REGION)
    return DynamoJobRepository(client, pipeline.resources.jobs_table, pipeline.resources.idempotency_table)


def _payloads(pipeline: Pipeline) -> DynamoS3PayloadStore:
    client = boto3.client("dynamodb", endpoint_url=pipeline.endpoint, region_name=REGION)
    return DynamoS3PayloadStore(
        client,
        lambda: boto3.client("s3", endpoint_url=pipeline.endpoint, region_name=REGION),
        pipeline.resources.jobs_table,
        pipeline.resources.bucket,
    )


def _release(repository: DynamoJobRepository, job_id: str, token: str) -> JobRecord:
    """Running -> Pending under the lease, due at once, as the sweeper writes an expired lease back."""
    now = jobs.now_millis()
    return repository.transition(
        Transition(
            job_id=job_id,
            source=JobStatus.RUNNING,
            target=JobStatus.PENDING,
            now=now,
            lease_token=token,
            dispatch_at=now,
            sweep_at=now + timedelta(seconds=60),
        )
    )


def _terminal(job_id: str, token: str, target: JobStatus) -> Transition:
    error = JobError(code="invalid_input", message="stale") if target is JobStatus.FAILED else None
    return Transition(
        job_id=job_id,
        source=JobStatus.RUNNING,
        target=target,
        now=jobs.now_millis(),
        lease_token=token,
        error=error,
        result_location="item" if target is JobStatus.SUCCEEDED else None,
    )


def test_a_holder_whose_lease_expired_cannot_overwrite_the_next_holder(pipeline: Pipeline) -> None:
    repository = _repository(pipeline)
    job_id = pipeline.submit({"operation": "summarize", "input": {"text": "Two holders."}}, key="lease")[
        "body"
    ]["jobId"]
    # Given a first holder that claimed the job with a 1 s lease and then stalled
    first = jobs.claim(repository, job_id, token="first-holder", lease=timedelta(seconds=1))
    assert (first.status, first.attempts) == (JobStatus.RUNNING, 1)

    # When the sweeper runs until it expires that lease
    pipeline.wait_for(lambda: job_id in pipeline.sweep()["jobIds"])

    # Then the job is Pending again, isolated (the claim was not alone in its invocation, so the
    # crash is no one's in particular and costs no attempt), re-sent to the isolation queue, and
    # the stale holder can no longer even heartbeat
    recovered = repository.get_job(job_id)
    assert recovered is not None
    assert (recovered.status, recovered.attempts, recovered.lease_token) == (JobStatus.PENDING, 1, None)
    assert (recovered.isolated, recovered.stalls, recovered.crashes) == (True, 0, 0)
    assert pipeline.queue_depth(pipeline.queues.isolation_url) == 1
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == 0
    with pytest.raises(TransitionConflictError):
        repository.heartbeat(job_id, Lease(token="first-holder", expires_at=jobs.now_millis()))

    # When a second holder claims it, and the first one wakes up and writes its outcome
    second = jobs.claim(repository, job_id, token="second-holder", lease=timedelta(seconds=60))
    with pytest.raises(TransitionConflictError) as lost:
        repository.transition(_terminal(job_id, "first-holder", JobStatus.SUCCEEDED))

    # Then the stale write changed nothing: the job is the second holder's, Running
    assert lost.value.current is not None
    assert (lost.value.current.status, lost.value.current.lease_token) == (JobStatus.RUNNING, "second-holder")
    assert repository.get_job(job_id) == second

    # When the second holder finishes, and the first one tries again
    done = jobs.succeed(
        repository,
        _payloads(pipeline),
        second,
        output="the second holder's output",
        usage=Usage(input_tokens=3, output_tokens=2),
    )
    with pytest.raises(TransitionConflictError):
        repository.transition(_terminal(job_id, "first-holder", JobStatus.FAILED))

    # Then the job keeps the second holder's outcome
    assert repository.get_job(job_id) == done
    final = pipeline.status(job_id)
    assert (final["status"], final["attempts"], final["error"]) == ("Succeeded", 2, None)
    assert pipeline.result(job_id)["body"]["output"] == "the second holder's output"


def test_a_worker_that_lost_its_lease_mid_call_writes_nothing_more(patient_pipeline: Pipeline) -> None:
    pipeline = patient_pipeline
    repository = _repository(pipeline)
    # Given a worker invocation in the middle of a 3 s model call
    job_id = pipeline.submit(
        {"operation": "summarize", "input": {"text": "A slow one. [[delay:3]]"}}, key="lease-lost"
    )["body"]["jobId"]
    assert pipeline.relay.poll() == 1
    invocations = pipeline.spy_worker()
    invocation = pipeline.in_background(pipeline.worker.poll)
    pipeline.wait_for(lambda: pipeline.status(job_id)["status"] == "Running")
    held = repository.get_job(job_id)
    assert held is not None
    assert held.lease_token is not None

    # When its lease is taken over (expired by the sweeper's write, then claimed by another worker)
    _release(repository, job_id, held.lease_token)
    usurped = jobs.claim(repository, job_id, token="usurper", lease=timedelta(seconds=60))
    invocation.join()

    # Then the worker's next heartbeat found the job gone: it wrote nothing and deleted its message
    assert repository.get_job(job_id) == usurped
    assert [i.failures for i in invocations] == [[]]
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == 0
    status = pipeline.status(job_id)
    assert (status["status"], status["attempts"], status["usage"]) == ("Running", 2, None)
    # ... and its call, abandoned, was the only one made
    pipeline.wait_for(lambda: len(pipeline.model_calls()) == 1)
    assert repository.get_job(job_id) == usurped


def test_heartbeats_keep_a_call_longer_than_the_lease_alive_while_the_sweeper_runs(
    patient_pipeline: Pipeline,
) -> None:
    pipeline = patient_pipeline
    # Given a model call of 4 s, twice the 2 s lease, heartbeats every 0.2 s
    job_id = pipeline.submit(
        {"operation": "summarize", "input": {"text": "Longer than a lease. [[delay:4]]"}}, key="heartbeat"
    )["body"]["jobId"]

    # When the job runs with the sweeper running on its schedule throughout
    with pipeline.sweeper_in_background() as sweeps:
        [final] = pipeline.terminal(job_id)

    # Then the sweeper saw the job once its first lease had passed, and left it alone
    assert any(report["examined"] > 0 for report in sweeps)
    assert all(job_id not in report["jobIds"] for report in sweeps)
    # ... and the first claim finished it with the only model call
    assert final["status"] == "Succeeded"
    assert final["attempts"] == 1
    assert len(pipeline.model_calls()) == 1


class _HeartbeatLandsAfterTheSweepersRead:
    """The sweeper's repository, except that the live holder's heartbeat lands just after the
    sweeper read the job (a late heartbeat: the read saw an expired lease)."""

    def __init__(self, inner: JobRepository, holder: DynamoJobRepository, lease_token: str) -> None:
        self._inner, self._holder, self._lease_token = inner, holder, lease_token

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_job(self, job_id: str) -> JobRecord | None:
        seen = self._inner.get_job(job_id)
        self._holder.heartbeat(job_id, Lease(self._lease_token, jobs.now_millis() + timedelta(seconds=60)))
        return seen


@pytest.mark.parametrize("attempts_before", [0, 2], ids=["attempts-left", "last-attempt"])
def test_a_heartbeat_after_the_sweepers_read_keeps_the_job_with_its_holder(
    pipeline: Pipeline, attempts_before: int
) -> None:
    repository = _repository(pipeline)
    job_id = pipeline.submit(
        {"operation": "summarize", "input": {"text": "Held, late."}}, key=f"late-heartbeat-{attempts_before}"
    )["body"]["jobId"]
    # Given a job whose earlier claims were released (so the next claim may be its last) ...
    for attempt in range(attempts_before):
        jobs.claim(repository, job_id, token=f"earlier-{attempt}", lease=timedelta(seconds=60))
        _release(repository, job_id, f"earlier-{attempt}")
    # ... claimed by a live holder whose lease has already lapsed when the sweeper reads it
    held = jobs.claim(repository, job_id, token="live-holder", lease=timedelta(seconds=-1))
    assert held.attempts == attempts_before + 1

    # When the sweeper runs and the holder's heartbeat lands between its read and its write
    dependencies = build_dependencies(SweeperSettings.from_environ())
    late = _HeartbeatLandsAfterTheSweepersRead(dependencies.repository, repository, "live-holder")
    report = sweep(dataclasses.replace(dependencies, repository=late))

    # Then the sweeper leaves the job alone: no second run, no failure while it progresses
    assert job_id not in report.job_ids
    after = repository.get_job(job_id)
    assert after is not None
    assert (after.status, after.lease_token, after.attempts, after.error) == (
        JobStatus.RUNNING,
        "live-holder",
        attempts_before + 1,
        None,
    )
    assert after.lease_expires_at is not None
    assert after.lease_expires_at > jobs.now_millis()
    # ... nothing was re-sent, and the holder still has its lease
    assert pipeline.queue_depth(pipeline.queues.jobs_url) == 0
    repository.heartbeat(job_id, Lease("live-holder", jobs.now_millis() + timedelta(seconds=60)))


def test_model_calls_left_running_do_not_starve_the_heartbeats(patient_pipeline: Pipeline) -> None:
    pipeline = patient_pipeline
    # Given a warm worker whose model threads are all taken but one, by calls it abandoned earlier
    # (a cancel, a lost lease or a release leaves its call running until the SDK's timeout)
    model_threads = build_worker_dependencies(WorkerSettings.from_environ()).model_executor
    abandoned = threading.Event()
    for _ in range(model_threads._max_workers - 1):
        model_threads.submit(abandoned.wait, 60)
    try:
        # When a job's call outlasts its 2 s lease, with the sweeper on its schedule throughout
        job_id = pipeline.submit(
            {"operation": "summarize", "input": {"text": "Beside abandoned calls. [[delay:4]]"}},
            key="abandoned-calls",
        )["body"]["jobId"]
        with pipeline.sweeper_in_background() as sweeps:
            [final] = pipeline.terminal(job_id)
    finally:
        abandoned.set()

    # Then its heartbeats kept the lease: the first claim finished it with the only model call
    assert all(job_id not in report["jobIds"] for report in sweeps)
    assert (final["status"], final["attempts"]) == ("Succeeded", 1)
    assert len(pipeline.model_calls()) == 1
