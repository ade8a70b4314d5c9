"""Ports: what the domain needs from the outside world, as Protocols. Adapters live in shared.adapters."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from shared.cursor import ListPosition
from shared.errors import ConditionFailedError
from shared.job import (
    BlobLocation,
    IdempotencyRecord,
    JobError,
    JobInput,
    JobRecord,
    JobResult,
    JobSummary,
    Usage,
)
from shared.lifecycle import JobStatus


@dataclass(frozen=True)
class Lease:
    """Who holds a Running job, and until when (heartbeats move `expires_at`)."""

    token: str
    expires_at: datetime


@dataclass(frozen=True)
class Transition:
    """One guarded move in the lifecycle, applied as a single conditional write.

    The write succeeds only while the job is still in `source` (and, where `lease_token` is
    given, still held by that lease); otherwise nothing changes and ConditionFailedError says
    who won.
    """

    job_id: str
    source: JobStatus
    target: JobStatus
    now: datetime
    lease_token: str | None = None
    new_lease: Lease | None = None
    count_attempt: bool = False
    require_due: bool = False
    renew_attempts: bool = False
    operator_redrive: bool = False
    dispatch_at: datetime | None = None
    sweep_at: datetime | None = None
    cancel_requested_at: datetime | None = None
    error: JobError | None = None
    usage: Usage | None = None
    result_location: BlobLocation | None = None


class TransitionConflictError(ConditionFailedError):
    """A guarded write lost; `current` is the job as it stood (None when it does not exist)."""

    def __init__(self, current: JobRecord | None) -> None:
        super().__init__("The job changed before this write.")
        self.current = current


@dataclass(frozen=True)
class JobPageSlice:
    """One page read from the owner's index, and where the next one starts."""

    items: list[JobSummary]
    next_position: ListPosition | None


class JobRepository(Protocol):
    """Durable storage of jobs and idempotency claims.

    Every method is one DynamoDB request (or a short fixed sequence) and every state change
    is conditional, so concurrent writers and retried calls can never corrupt a job.
    """

    def claim_idempotency_key(self, record: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
        """Write the claim unless a live one exists; return the existing claim (None when this call won)."""
        ...

    def create_job(self, job: JobRecord) -> bool:
        """Write the job item unless it exists; True when this call created it."""
        ...

    def get_job(self, job_id: str) -> JobRecord | None:
        """The job, read strongly consistent, or None."""
        ...

    def list_jobs(
        self, owner_key: str, status: JobStatus | None, limit: int, after: ListPosition | None, now: datetime
    ) -> JobPageSlice:
        """The owner's unexpired jobs, newest first; at most `limit` read per page."""
        ...

    def transition(self, transition: Transition) -> JobRecord:
        """Apply a guarded transition; return the job as written."""
        ...

    def take_submit_quota(self, owner_key: str, window_start: datetime, limit: int) -> bool:
        """Count one submit in the owner's minute window; False when the window is full."""
        ...


class PayloadStore(Protocol):
    """Inputs and results: a DynamoDB item when small, an S3 object when large."""

    def put_input(self, job_input: JobInput, location: BlobLocation, expires_at: datetime) -> None:
        """Store the input; writing the same input twice is harmless."""
        ...

    def get_input(self, job_id: str, location: BlobLocation) -> JobInput | None:
        """The input, or None when it is gone."""
        ...

    def expire_input(self, job_id: str, location: BlobLocation, at: datetime) -> None:
        """Schedule a finished job's input for deletion (DESIGN.md: inputs live 24 h after the end)."""
        ...

    def put_result(self, result: JobResult, location: BlobLocation, expires_at: datetime) -> None:
        """Store the result; writing the same result twice is harmless."""
        ...

    def get_result(self, job_id: str, location: BlobLocation) -> JobResult | None:
        """The result, or None when it is gone."""
        ...


class SecretSource(Protocol):
    """Secrets by name, cached by the adapter (never logged, never in env vars)."""

    def get(self, name: str) -> str:
        """The secret's current value."""
        ...
