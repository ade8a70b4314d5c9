"""Jobs for tests: records to write through the repository, and the worker's moves, played by hand.

The worker is not under test here, so the transitions it would write are made through the
production repository (DynamoJobRepository.transition), with the same guards it uses.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.clock import truncate_to_millis
from shared.contract import Operation
from shared.identity import caller_from_claims
from shared.ids import new_job_id, new_sequence_id
from shared.job import BlobLocation, Caller, JobError, JobRecord, JobResult, Usage
from shared.lifecycle import JobStatus
from shared.ports import JobRepository, Lease, PayloadStore, Transition
from tests.support.events import load_event

LEASE = timedelta(seconds=60)
DISPATCH_GRACE = timedelta(minutes=15)


def sample_caller() -> Caller:
    """The caller of the sample events in events/ (tenant `acme`)."""
    claims: dict[str, Any] = load_event("submit")["requestContext"]["authorizer"]["jwt"]["claims"]
    return caller_from_claims(claims)


def now_millis() -> datetime:
    """The current instant at the precision the tables keep."""
    return truncate_to_millis(datetime.now(UTC))


def new_job(
    caller: Caller | None = None,
    *,
    created_at: datetime | None = None,
    expires_at: datetime | None = None,
    dispatch_at: datetime | None = None,
    job_id: str | None = None,
    sequence_id: str | None = None,
    status: JobStatus = JobStatus.PENDING,
    attempts: int = 0,
    max_attempts: int = 3,
    input_location: BlobLocation = "item",
) -> JobRecord:
    """A job record as the submit function would write it (Pending, due now, 30 days to live)."""
    owner = caller or sample_caller()
    created = created_at or now_millis()
    return JobRecord(
        job_id=job_id or new_job_id(),
        tenant=owner.tenant,
        owner=owner.sub,
        operation=Operation.SUMMARIZE,
        status=status,
        created_at=created,
        updated_at=created,
        expires_at=expires_at or created + timedelta(days=30),
        attempts=attempts,
        sequence_id=sequence_id or new_sequence_id(),
        model="gpt-4o-mini",
        prompt_version="summarize-v1",
        input_location=input_location,
        max_attempts=max_attempts,
        dispatch_at=dispatch_at or created,
        # A one-step job's claims so far are also its claims without progress.
        stalls=attempts,
    )


def create(repository: JobRepository, job: JobRecord) -> JobRecord:
    """Write a new job as the submit function does (the sweeper looks at it after the grace period)."""
    assert repository.create_job(job, job.dispatch_at + DISPATCH_GRACE)
    return job


def claim(
    repository: JobRepository,
    job_id: str,
    now: datetime | None = None,
    *,
    token: str | None = None,
    lease: timedelta = LEASE,
) -> JobRecord:
    """The worker's claim: Pending -> Running under a fresh lease (a random token unless given),
    counting an attempt."""
    at = now or now_millis()
    return repository.transition(
        Transition(
            job_id=job_id,
            source=JobStatus.PENDING,
            target=JobStatus.RUNNING,
            now=at,
            new_lease=Lease(token=token or secrets.token_hex(16), expires_at=at + lease),
            count_attempt=True,
            require_due=True,
            sweep_at=at + lease,
        )
    )


def succeed(
    repository: JobRepository,
    payloads: PayloadStore,
    running: JobRecord,
    *,
    output: str,
    usage: Usage | None = None,
    location: BlobLocation = "item",
) -> JobRecord:
    """The lease holder stores the result, then writes Running -> Succeeded."""
    now = now_millis()
    payloads.put_result(JobResult(job_id=running.job_id, output=output), location, running.expires_at)
    return repository.transition(
        Transition(
            job_id=running.job_id,
            source=JobStatus.RUNNING,
            target=JobStatus.SUCCEEDED,
            now=now,
            lease_token=running.lease_token,
            usage=usage,
            result_location=location,
        )
    )


def fail(
    repository: JobRepository, running: JobRecord, error: JobError, usage: Usage | None = None
) -> JobRecord:
    """The lease holder writes Running -> Failed with a terminal error."""
    return repository.transition(
        Transition(
            job_id=running.job_id,
            source=JobStatus.RUNNING,
            target=JobStatus.FAILED,
            now=now_millis(),
            lease_token=running.lease_token,
            error=error,
            usage=usage,
        )
    )
