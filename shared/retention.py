"""When a job's input may be deleted (DESIGN.md, "Idempotency": retention).

An input lives 24 h (`inputRetentionHours`) after its job ends. Until the job ends it must
outlive it, yet an input whose job item never got written (a submit that crashed between its
writes and was never retried) must not linger for the job's 30 days. So an input is written to
expire one retention after its submit, as if the job had ended then; a job still alive half a
retention after its submit renews it at its next dispatch or claim; and whoever ends the job
sets the final expiry before the terminal write, so a failed expiry update leaves the job
unfinished for its next writer (a release, the sweeper) to repair, never a finished job with an
input kept 30 days.

A small input carried in the job item itself ends with the terminal write (which removes it),
except that of a Failed job: an operator may redrive that one, so it is first copied to an input
item that lives one retention, and the terminal write records the new location.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from shared.job import BlobLocation, JobRecord
from shared.lifecycle import JobStatus
from shared.ports import PayloadStore


def input_expiry(at: datetime, retention_hours: int) -> datetime:
    """The input's expiry for a job that ends (or, at submit, might never start) at `at`."""
    return at + timedelta(hours=retention_hours)


def input_needs_renewal(job: JobRecord, now: datetime, retention_hours: int) -> bool:
    """True when a live job is old enough that its input could expire before the job ends."""
    return now >= job.created_at + timedelta(hours=retention_hours) / 2


def end_input(
    payloads: PayloadStore, job: JobRecord, target: JobStatus, now: datetime, retention_hours: int
) -> BlobLocation | None:
    """Before the write that ends `job` as `target`: give its input its last expiry. Returns the
    input's new location when it moved (the terminal write records it), else None."""
    at = input_expiry(now, retention_hours)
    if job.input_location != "job":
        payloads.set_input_expiry(job.job_id, job.input_location, at)
        return None
    inline = job.inline_input()
    if target is not JobStatus.FAILED or inline is None:
        return None  # the terminal write removes it: nothing can run this job again
    payloads.put_input(inline, "item", at)
    return "item"
