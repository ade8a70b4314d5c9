"""A one-step batch job ends at the poller: its answer is its result, written with the usual
terminal write under the batch hold (DESIGN.md, "Cost tiers": "its last one ends it through the
usual terminal write").

Handing the job back for a worker to adopt the answer would cost a second claim, a queue message
and a worker invocation per job for nothing the poller cannot write itself; what a worker's
Succeeded write does is done here the same way: the result in the job item when it fits (else
stored first, write-once), the input's last expiry, usage added, the batch marked seen (none of its
usage is late for the job), and the "job finished" line on-call counts by tenant. A classify answer
takes the caller's spelling of its label, as the worker's does; the labels come from the job's
input (in the job item, or read from where it is stored), read only for classify.

Every write is conditional on the hold, so a run repeated after a crash writes nothing twice; a
cancel requested meanwhile wins: the job ends Canceled (`cancel`), its answer late.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from functions.batch_poller.dependencies import BatchPollerDependencies
from shared.batches import BatchAnswer
from shared.contract import Operation
from shared.job import BlobLocation, JobRecord, JobResult
from shared.labels import normalize_label
from shared.lifecycle import JobStatus
from shared.observability import logger, metrics
from shared.ports import Transition, TransitionConflictError
from shared.resources import INLINE_PAYLOAD_LIMIT_BYTES
from shared.retention import end_input


class Finished(StrEnum):
    """How the attempt to end a job with its batch answer went."""

    SUCCEEDED = "succeeded"
    HAND_BACK = "hand_back"  # its labels are not at hand: a worker ends it
    CANCEL_WON = "cancel_won"  # a cancel was requested under the hold: the job is Canceled
    MOVED_ON = "moved_on"  # another writer ended or took the job: nothing to do


def finish(deps: BatchPollerDependencies, job: JobRecord, batch_id: str, answer: BatchAnswer) -> Finished:
    """Running -> Succeeded under the hold, with the answer as the job's result."""
    at_hand, labels = _labels(deps, job)
    if not at_hand:
        return Finished.HAND_BACK
    result = JobResult(job_id=job.job_id, output=normalize_label(answer.text, labels), usage=answer.usage)
    location, body, stored = _placed(deps, job, result)
    now = deps.clock.now()
    moved = end_input(deps.payloads, job, JobStatus.SUCCEEDED, now, deps.settings.input_retention_hours)
    transition = Transition(
        job_id=job.job_id,
        source=JobStatus.RUNNING,
        target=JobStatus.SUCCEEDED,
        now=now,
        lease_token=job.lease_token,
        usage=stored.usage,
        result_location=location,
        result_body=body,
        input_location=moved,
        batch_seen=batch_id,  # its answer was kept: none of this batch's usage is late for it
    )
    try:
        deps.repository.transition(transition)
    except TransitionConflictError as conflict:
        if cancel_if_requested(deps, job, conflict):
            return Finished.CANCEL_WON
        logger.info("job moved on before its batch answer was written", extra={"job_id": job.job_id})
        return Finished.MOVED_ON
    metrics.add_metric(name=f"Jobs{JobStatus.SUCCEEDED.value}", unit="Count", value=1)
    # The worker's line, with the tenant: on-call's top-tenants query counts these (docs/runbook.md).
    logger.info(
        "job finished",
        extra={
            "status": JobStatus.SUCCEEDED.value,
            "error_code": None,
            "tenant": job.tenant,
            "batch_id": batch_id,
        },
    )
    return Finished.SUCCEEDED


def _labels(deps: BatchPollerDependencies, job: JobRecord) -> tuple[bool, tuple[str, ...] | None]:
    """Whether the job's labels are at hand, and they (None for any operation but classify)."""
    if job.operation is not Operation.CLASSIFY:
        return True, None
    job_input = job.inline_input() or deps.payloads.get_input(job.job_id, job.input_location)
    if job_input is None:  # gone (it outlives the job's run): a worker's claim ends the job as such
        return False, None
    return True, job_input.labels or None


def _placed(
    deps: BatchPollerDependencies, job: JobRecord, result: JobResult
) -> tuple[BlobLocation, str | None, JobResult]:
    """Where the result goes, as the worker places it: in the terminal write itself when it fits
    the job item, else stored first (write-once: a run repeated after a crash finds its own)."""
    body = result.body()
    if deps.repository.fits_in_job_item(job, result_body=body):
        return "job", body, result
    location = stored_location(result)
    return location, None, deps.payloads.put_result(result, location, job.expires_at)


def stored_location(result: JobResult) -> BlobLocation:
    """Where a result stored on its own goes: an item, or S3 past the inline limit (as the worker's)."""
    return "s3" if len(result.output.encode("utf-8")) > INLINE_PAYLOAD_LIMIT_BYTES else "item"


def cancel_if_requested(
    deps: BatchPollerDependencies, job: JobRecord, conflict: TransitionConflictError
) -> bool:
    """After a write under the hold lost: end the job Canceled if what beat it was a cancel request
    under the same hold (Canceled wins over any outcome, as in a worker); True if so."""
    current = conflict.current
    if (
        current is None
        or current.status is not JobStatus.CANCELLATION_REQUESTED
        or current.lease_token != job.lease_token
    ):
        return False
    cancel(deps, current)
    return True


def cancel(deps: BatchPollerDependencies, job: JobRecord) -> None:
    """The terminal write a worker makes on a cancel it observes, under the batch hold."""
    now: datetime = deps.clock.now()
    moved = end_input(deps.payloads, job, JobStatus.CANCELED, now, deps.settings.input_retention_hours)
    transition = Transition(
        job_id=job.job_id,
        source=JobStatus.CANCELLATION_REQUESTED,
        target=JobStatus.CANCELED,
        now=now,
        lease_token=job.lease_token,
        input_location=moved,
    )
    try:
        deps.repository.transition(transition)
    except TransitionConflictError:
        logger.info("canceled job moved on first", extra={"job_id": job.job_id})
        return
    logger.info("job canceled while its batch ran", extra={"job_id": job.job_id})
