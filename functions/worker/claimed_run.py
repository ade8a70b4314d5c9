"""One claimed job as the worker's parts pass it between them: the record as last written, the
lease that guards every write, and what the claim spent and received that is not recorded yet.

Its own module because every part of the worker (the spine, the terminal writes, the hand-backs,
the lease keeping, the tier paths) reads and updates it; none of them owns it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from functions.worker.streaming import StreamingCall
from shared.job import BlobLocation, JobRecord, JobResult, Usage
from shared.lifecycle import JobStatus
from shared.ports import JobMessage, Lease, TransitionConflictError


@dataclass
class ClaimedRun:
    """One claimed job: the record as last written and the lease that guards every write."""

    job: JobRecord
    lease: Lease
    message: JobMessage  # what dispatched it: a hand-back sends a fresh copy of it
    usage: Usage | None = None  # added to the job's (a one-step job's call)
    # `usage` includes the tokens of the job's stored result (JobRecord.result_usage_counted).
    usage_has_result: bool = False
    usage_total: Usage | None = None  # replaces it (a multi-step job: every checkpoint's tokens)
    extra_usage: Usage | None = None  # with usage_total: the calls outside the checkpoints
    # The model's answer once received, until it is stored as the job's result: an error before
    # the store is followed by one more try, so the next claim adopts it instead of paying again.
    unsaved: tuple[JobResult, BlobLocation] | None = None
    last_heartbeat: float = field(default_factory=time.monotonic)  # the claim counts as one
    streaming: StreamingCall | None = None  # the final call of a streaming job, while it runs
    slot: int | None = None  # the running slot a capped tenant's claim holds (shared.slots)


def cancel_won(conflict: TransitionConflictError, run: ClaimedRun) -> bool:
    """True when the write lost only to a cancel request on a job we still hold; `run` adopts it."""
    current = conflict.current
    if (
        current is None
        or current.status is not JobStatus.CANCELLATION_REQUESTED
        or current.lease_token != run.lease.token
        or run.job.status is JobStatus.CANCELLATION_REQUESTED
    ):
        return False
    run.job = current
    return True
