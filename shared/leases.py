"""What an expired lease means for its job: crash isolation (DESIGN.md, "Lifecycle").

A lease runs out only when its holder stopped heartbeating: the invocation died (a crash, an
out-of-memory kill, a timeout) or lost its storage. When the invocation held several jobs, any
one of them may have killed it, so no job in that batch is charged: each goes back to Pending,
isolated, to run alone from the isolation queue. When the claim ran alone (`solo`), the crash
was the job's own doing and counts; at `max_crashes` the job fails with `worker_crashed`
instead of taking down worker after worker.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.job import JobRecord
from shared.lifecycle import JobStatus


@dataclass(frozen=True)
class ExpiredLeaseOutcome:
    """The one write that ends an expired lease, as data."""

    target: JobStatus
    error_code: str | None = None
    isolate: bool = False  # from now on the job runs alone (isolation queue)
    count_crash: bool = False  # crashes += 1: the job crashed a worker it had to itself
    refund_stall: bool = False  # the crashed claim is not charged to the job's retry budget

    @property
    def dispatches(self) -> bool:
        """True when the job goes back to Pending and needs a new message."""
        return self.target is JobStatus.PENDING


def expired_lease_outcome(job: JobRecord, max_crashes: int) -> ExpiredLeaseOutcome:
    """Decide what happens to a job whose lease expired (the caller checked that it did)."""
    if job.status is JobStatus.CANCELLATION_REQUESTED:
        # The caller asked to stop; whatever killed the worker, the job ends now.
        return ExpiredLeaseOutcome(JobStatus.CANCELED)
    if job.waiting_for is not None:
        # A batch hold that lapsed (its batch never made, or never seen through): no worker held
        # the job, so nothing crashed (DESIGN.md, "Cost tiers"); it is handed back as it stands.
        return ExpiredLeaseOutcome(JobStatus.PENDING, refund_stall=True)
    if not job.solo:
        return ExpiredLeaseOutcome(JobStatus.PENDING, isolate=True, refund_stall=True)
    if job.crashes + 1 >= max_crashes:
        return ExpiredLeaseOutcome(JobStatus.FAILED, error_code="worker_crashed", count_crash=True)
    if job.stalls >= job.max_attempts:
        return ExpiredLeaseOutcome(
            JobStatus.FAILED, error_code="retries_exhausted", isolate=True, count_crash=True
        )
    return ExpiredLeaseOutcome(JobStatus.PENDING, isolate=True, count_crash=True)
