"""One dispatching step of an operator run: the conditional write, the input's retention, the send.

Shared by `dlq redrive` (which then deletes the DLQ message) and `jobs redrive` (which has no
message to delete). The order is what makes a run safe to interrupt and to rerun: the write
first (a job that moved on since the plan is left alone), then the input's retention (the job
is going to run, so its input must live as long as the job), then a new message on the queue of
the job's lane as written (`Lane.of`). A failure after the write leaves the job Pending: a rerun
plans a redispatch (which renews and sends), and the sweeper re-sends it after its grace anyway.

A redrive starts a new run, so before its write it reserves the run's tokens when the job's
tenant has a budget (outlast.operator.budgets): refused when they do not fit, with nothing
written. A step that fails after reserving leaves the reservation for its rerun, which finds it
made (it is keyed by the job and the run); if no rerun comes, the sweeper releases it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from botocore.exceptions import BotoCoreError, ClientError

from outlast.operator.budgets import BudgetRefusedError, OperatorBudgets
from outlast.operator.plan import Decision, DispatchBump, queue_name, write_for_job
from shared.errors import StorageUnavailableError
from shared.job import JobRecord
from shared.ports import (
    JobMessage,
    JobQueue,
    JobRepository,
    Lane,
    PayloadStore,
    Transition,
    TransitionConflictError,
)

# What an AWS call can fail with once the target is resolved.
AWS_ERRORS = (ClientError, BotoCoreError, StorageUnavailableError)


class Result(StrEnum):
    """How one step of a run ended."""

    DONE = "done"  # as planned
    KEPT = "kept"  # the plan keeps the message or leaves the job (released at once)
    CHANGED = "changed"  # the job moved on since the plan: nothing written
    REFUSED = "refused"  # the redriven run does not fit its tenant's token budget: nothing written
    FAILED = "failed"  # an AWS call failed: the detail says what state it left


@dataclass(frozen=True)
class Dispatched:
    """How a dispatching step ended: DONE (written, renewed, sent), CHANGED or FAILED."""

    result: Result
    detail: str
    written: JobRecord | None = None  # the job as written, once the write went through
    lane: Lane | None = None  # where it was sent (DONE only)


def describe(error: Exception) -> str:
    """An AWS error in a few words (its code), never its message text."""
    if isinstance(error, ClientError):
        return f"AWS error {error.response.get('Error', {}).get('Code', 'unknown')}"
    return type(error).__name__


def _reserve(
    budgets: OperatorBudgets,
    write: Transition,
    job: JobRecord,
    *,
    now: datetime,
    grace: timedelta,
    rerun: str,
) -> Transition | Dispatched:
    """The redrive's write with the new run's budget hold, or why nothing is to be written."""
    try:
        hold = budgets.reserve_redrive(job, now, grace)
    except BudgetRefusedError as refusal:
        return Dispatched(
            Result.REFUSED,
            f"over budget, nothing changed: {refusal} Raise it (`outlast ops budgets set`) or wait; {rerun}",
        )
    except AWS_ERRORS as error:
        return Dispatched(Result.FAILED, f"nothing changed ({describe(error)}); {rerun}")
    # Only into the run the reservation was made after: a redrive that raced another one would
    # carry a hold for a stale run.
    return replace(write, budget=hold, require_redrive_count=job.redrive_count)


def dispatch(
    repository: JobRepository,
    payloads: PayloadStore,
    queues: Mapping[Lane, JobQueue],
    job: JobRecord,
    decision: Decision,
    *,
    now: datetime,
    grace: timedelta,
    trace_id: str | None,
    rerun: str,
    budgets: OperatorBudgets | None,
) -> Dispatched:
    """Reserve (a redrive of a budgeted tenant's job), write, renew, send; `rerun` says how to
    finish a step that failed after its write. `budgets`: None for a stack without budgets."""
    write = write_for_job(job, decision, now, grace)
    if isinstance(write, Transition) and write.operator_redrive and budgets is not None:
        reserved = _reserve(budgets, write, job, now=now, grace=grace, rerun=rerun)
        if isinstance(reserved, Dispatched):
            return reserved
        write = reserved
    try:
        if isinstance(write, DispatchBump):
            written = repository.bump_dispatch(write.job, write.now, write.sweep_at)
        else:
            written = repository.transition(write)
    except TransitionConflictError as conflict:
        now_status = conflict.current.status.value if conflict.current else "gone"
        return Dispatched(
            Result.CHANGED,
            f"the job changed since the plan (now {now_status}): nothing written; {rerun} to re-plan",
        )
    except AWS_ERRORS as error:
        return Dispatched(Result.FAILED, f"nothing changed ({describe(error)}); {rerun}")
    grace_seconds = int(grace.total_seconds())
    left = f"{rerun} (it plans a redispatch), or the sweeper re-sends it after its grace ({grace_seconds} s)"
    # The job is going to run: its input must live as long as the job, not the 24 h it was given
    # when the job ended. Every dispatching step renews it (it is idempotent), not just the
    # redrive, so the rerun a failure asks for (which finds the job Pending and plans a
    # redispatch) renews it too.
    try:
        payloads.set_input_expiry(job.job_id, written.input_location, written.expires_at)
    except AWS_ERRORS as error:
        return Dispatched(
            Result.FAILED,
            f"job {written.status.value} but its input retention not renewed ({describe(error)}); {rerun}",
            written,
        )
    lane = Lane.of(written)
    state = (
        f"{written.status.value}, attempts {written.attempts}, "
        f"stalls {written.stalls}/{written.max_attempts}, crashes {written.crashes}, "
        f"redriveCount {written.redrive_count}"
    )
    try:
        queues[lane].send(JobMessage.of(job, trace_id or uuid.uuid4().hex))
    except AWS_ERRORS as error:
        return Dispatched(
            Result.FAILED,
            f"job {state} but not sent to the {queue_name(lane)} ({describe(error)}): {left}",
            written,
        )
    return Dispatched(Result.DONE, f"job {state}; sent to the {queue_name(lane)}", written, lane)
