"""The read and cancel use cases: every one authorized against the stored owner."""

from __future__ import annotations

import json
from dataclasses import dataclass

from functions.status.dependencies import StatusDependencies
from shared import budgets
from shared.clock import truncate_to_millis
from shared.contract import JobPage, Operation, OutputPage, ResultDocument
from shared.errors import (
    JobNotCancelableError,
    JobNotFoundError,
    JobNotSucceededError,
    StorageUnavailableError,
)
from shared.job import Caller, JobRecord
from shared.lifecycle import JobStatus
from shared.observability import bind_job, logger
from shared.output import OutputCursor, output_page
from shared.payload_reads import result_of
from shared.ports import Transition, TransitionConflictError
from shared.retention import end_input

# A cancel races at most the worker's claim and its terminal write; more conflicts mean trouble.
_CANCEL_ROUNDS = 4


@dataclass(frozen=True)
class CancelOutcome:
    """The job after the cancel, and whether the cancel is still under way (202) or done (200)."""

    job: JobRecord
    in_progress: bool


def _visible(job: JobRecord | None, caller: Caller, deps: StatusDependencies) -> JobRecord:
    # Missing, expired and someone else's all look the same: a 404, never a 403.
    if job is None or not job.is_owned_by(caller) or job.is_expired(deps.clock.now()):
        raise JobNotFoundError
    return job


def get_job(deps: StatusDependencies, caller: Caller, job_id: str) -> JobRecord:
    """The caller's job, read strongly consistent."""
    bind_job(job_id)
    return _visible(deps.repository.get_job(job_id), caller, deps)


def get_result(deps: StatusDependencies, caller: Caller, job_id: str) -> ResultDocument:
    """The output of the caller's Succeeded job."""
    job = get_job(deps, caller, job_id)
    if job.status is not JobStatus.SUCCEEDED or job.result_location is None:
        raise JobNotSucceededError(f"The job is {job.status.value}; only a Succeeded job has a result.")
    result = result_of(job, deps.payloads)
    if result is None:
        logger.error("result missing for a succeeded job")
        raise StorageUnavailableError("The result is not readable right now; retry shortly.")
    # extract's output is stored as the JSON text its worker validated; the caller gets the value.
    structured = job.operation is Operation.EXTRACT
    return ResultDocument(
        job_id=job.job_id,
        operation=job.operation,
        output=json.loads(result.output) if structured else result.output,
        output_format="json" if structured else "text",
        usage=job.usage.document() if job.usage else None,
    )


def get_output(
    deps: StatusDependencies, caller: Caller, job_id: str, after: OutputCursor, limit: int
) -> OutputPage:
    """The caller's job's output events after `after` (a job that does not stream has none).

    The job is read first, then the events (both strongly consistent): a job that had ended when
    it was read has all its events written, so the page can say whether it is complete."""
    job = get_job(deps, caller, job_id)
    events = deps.events.events_after(job.job_id, after, limit + 1, deps.clock.now()) if job.stream else []
    return output_page(job, events, limit, after)


def cancel_job(deps: StatusDependencies, caller: Caller, job_id: str) -> CancelOutcome:
    """Cancel the caller's job: Pending ends at once, Running is asked to stop at its next check."""
    job = get_job(deps, caller, job_id)
    for _ in range(_CANCEL_ROUNDS):
        outcome = _cancel_step(deps, job)
        if isinstance(outcome, CancelOutcome):
            return outcome
        job = _visible(outcome, caller, deps)
    raise StorageUnavailableError("The job is changing quickly; retry the cancel.")


def _cancel_step(deps: StatusDependencies, job: JobRecord) -> CancelOutcome | JobRecord | None:
    """One attempt: the outcome, or the job as it now stands when a concurrent write won."""
    if job.status in {JobStatus.CANCELLATION_REQUESTED, JobStatus.CANCELED}:
        return CancelOutcome(job=job, in_progress=job.status is JobStatus.CANCELLATION_REQUESTED)
    if job.status not in {JobStatus.PENDING, JobStatus.RUNNING}:
        raise JobNotCancelableError(f"The job already ended as {job.status.value}.")
    now = truncate_to_millis(deps.clock.now())
    target = JobStatus.CANCELED if job.status is JobStatus.PENDING else JobStatus.CANCELLATION_REQUESTED
    if target is JobStatus.CANCELED:
        # The input's final expiry before the terminal write (shared.retention): if it fails, the
        # caller gets a 503 and nothing has changed.
        end_input(deps.payloads, job, target, now, deps.settings.input_retention_hours)
    try:
        written = deps.repository.transition(
            Transition(job_id=job.job_id, source=job.status, target=target, now=now, cancel_requested_at=now)
        )
    except TransitionConflictError as conflict:
        return conflict.current
    logger.info("cancel recorded", extra={"from": job.status.value, "to": target.value})
    return CancelOutcome(job=written, in_progress=target is JobStatus.CANCELLATION_REQUESTED)


def list_jobs(
    deps: StatusDependencies, caller: Caller, status: JobStatus | None, limit: int, cursor: str | None
) -> JobPage:
    """One page of the caller's jobs, newest first; the cursor is bound to the caller and filter."""
    codec = deps.cursor_codec()
    status_name = status.value if status else None
    after = codec.decode(caller, status_name, cursor) if cursor is not None else None
    page = deps.repository.list_jobs(caller.owner_key, status, limit, after, deps.clock.now())
    next_cursor = (
        codec.encode(caller, status_name, page.next_position) if page.next_position is not None else None
    )
    return JobPage(items=budgets.documents(deps.budgets, page.items), next_cursor=next_cursor)
