"""The batch poller's use case: see each open provider batch through (DESIGN.md, "Cost tiers").

For a batch still running, a job whose cancel was requested ends Canceled now (its hold is its
lease), and a batch none of whose jobs still waits is cancelled at the provider. For an ended batch,
each call's answer that is fit to keep (shared.batches.answer_of) is written once: a one-step job's
as its result, a step's as its checkpoint (write-once: a written answer is never paid for again).
A one-step job still waiting ends here, Succeeded with its answer through the usual terminal write
under its hold (functions.batch_poller.finish); any other job still waiting goes back to Pending
under its hold and is dispatched: its next claim sends its next ready steps to the next batch, or
ends it with its final output. A
job with a call left unanswered (expired or failed batch, a refused or unfit answer) is marked to
fall back: its remaining calls run at flex, then standard, where their errors are classified as
any call's. A job that moved on (canceled, taken over) has its late answers discarded, but what the
provider billed for them is counted onto the ended job and its tenant's budget once per (job,
batch) (functions.batch_poller.late). Every write is conditional (on the call's hold, or on the
job's record of the batches it was seen through), so a second run over the same batch changes
nothing; the batch leaves the open list last. A batch its batcher died before recording is found
by the batcher's intent and seen through as an orphan (functions.batch_poller.orphans).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from functions.batch_poller.dependencies import BatchPollerDependencies
from functions.batch_poller.finish import Finished, cancel, cancel_if_requested, finish, stored_location
from functions.batch_poller.late import lines_of, output_lines, settle_late_lines
from functions.batch_poller.orphans import resolve_intent, see_orphan_through
from shared.batches import (
    BatchAnswer,
    BatchCall,
    BatchStatus,
    OpenBatch,
    ProviderBatch,
    answer_of,
    billed_usage,
    schema_of,
)
from shared.job import JobRecord, JobResult, StepOutput, Usage, add_usage
from shared.lifecycle import JobStatus
from shared.observability import logger
from shared.ports import JobMessage, Lane, Transition, TransitionConflictError
from shared.retention import input_expiry

_WAITING = frozenset({JobStatus.RUNNING, JobStatus.CANCELLATION_REQUESTED})


@dataclass
class PollReport:
    """One run: open batches seen, ended ones seen through, jobs handed back, and the alarms' counts."""

    open: int = 0
    ended: int = 0
    handed_back: int = 0
    finished: int = 0  # one-step jobs ended Succeeded with their batch answer (no hand-back)
    overdue: int = 0  # open past the completion window
    failed: int = 0  # ended failed or expired
    errors: int = 0  # batches (or intents) this run could not look at (the next run tries again)
    orphaned: int = 0  # provider batches found that their batcher died before recording


def poll(deps: BatchPollerDependencies) -> PollReport:
    """One look at every open batch and every intent left behind (up to the run's limit)."""
    report = PollReport()
    entries = deps.batches.list_open(deps.settings.max_batches_per_run)
    # The open batches first: jobs wait on them, and an intent's look-up pages through the
    # provider's list, which a slow provider could make outlast the run.
    for batch in entries.batches:
        report.open += 1
        report.overdue += batch.overdue(deps.clock.now())
        try:
            _look_at(deps, batch, report)
        except Exception:  # noqa: BLE001 - logged; one batch must not hold up the others
            logger.exception("the poller could not see a batch through", extra={"batch_id": batch.batch_id})
            report.errors += 1
    for intent in entries.intents:
        try:
            report.orphaned += resolve_intent(deps, intent)
        except Exception:  # noqa: BLE001 - logged; one intent must not hold up the others
            logger.exception(
                "the poller could not resolve a batch intent", extra={"intent_id": intent.intent_id}
            )
            report.errors += 1
    return report


def _look_at(deps: BatchPollerDependencies, batch: OpenBatch, report: PollReport) -> None:
    provider = deps.api().retrieve(batch.batch_id)
    if batch.orphaned:
        if see_orphan_through(deps, batch, provider):
            report.ended += 1
            deps.batches.delete(batch.batch_id)
    elif provider.ended:
        report.ended += 1
        report.failed += provider.status in (BatchStatus.FAILED, BatchStatus.EXPIRED)
        _see_through(deps, batch, provider, report)
        deps.batches.delete(batch.batch_id)  # last: a run that died before it is repeated
    else:
        _honour_cancels(deps, batch, provider)


def _waiting(deps: BatchPollerDependencies, batch: OpenBatch) -> dict[str, JobRecord]:
    """The batch's jobs that still wait on it: Running or CancellationRequested under the call's hold."""
    holds = {call.job_id: call.hold for call in batch.calls}
    waiting: dict[str, JobRecord] = {}
    for job_id in batch.job_ids:
        job = deps.repository.get_job(job_id)
        if job is not None and job.status in _WAITING and job.lease_token == holds[job_id]:
            waiting[job_id] = job
    return waiting


def _honour_cancels(deps: BatchPollerDependencies, batch: OpenBatch, provider: ProviderBatch) -> None:
    waiting = _waiting(deps, batch)
    for job in waiting.values():
        if job.status is JobStatus.CANCELLATION_REQUESTED:
            cancel(deps, job)
    nobody_waits = all(job.status is JobStatus.CANCELLATION_REQUESTED for job in waiting.values())
    if nobody_waits and provider.status != "cancelling":
        # Nobody waits on it any more: stop the provider's work (what it answered so far is billed).
        deps.api().cancel(provider.batch_id)
        logger.info("batch cancelled: no job waits on it", extra={"batch_id": provider.batch_id})


@dataclass(frozen=True)
class _Lines:
    """An ended batch's output lines and the schemas its structured calls asked for, by custom_id."""

    answers: dict[str, dict[str, Any]]
    schemas: dict[str, dict[str, Any] | None]


def _see_through(
    deps: BatchPollerDependencies, batch: OpenBatch, provider: ProviderBatch, report: PollReport
) -> None:
    lines = _Lines(output_lines(deps, provider.output_file_id), _schemas(deps, batch, provider))
    waiting = _waiting(deps, batch)
    for job_id in batch.job_ids:
        calls = [call for call in batch.calls if call.job_id == job_id]
        job = waiting.get(job_id)
        if job is not None and job.status is JobStatus.RUNNING:
            if _move_on(deps, job, calls, batch.batch_id, lines=lines, report=report):
                continue
        elif job is not None:
            cancel(deps, job)  # its answers, late, are discarded
        settle_late_lines(deps, job_id, batch.batch_id, lines_of(calls, lines.answers))


def _move_on(
    deps: BatchPollerDependencies,
    job: JobRecord,
    calls: list[BatchCall],
    batch_id: str,
    *,
    lines: _Lines,
    report: PollReport,
) -> bool:
    """End a one-step job with its answer, or keep the answers and hand the job back; False when
    neither happened (a cancel won, or another writer took the job): its answers are then late."""
    answer = _one_step_answer(deps, calls, lines)
    if answer is not None:
        outcome = finish(deps, job, batch_id, answer)
        if outcome is Finished.SUCCEEDED:
            report.finished += 1
            return True
        if outcome is not Finished.HAND_BACK:
            return False
    kept = [
        _keep(deps, job, call, lines.answers.get(call.custom_id), lines.schemas.get(call.custom_id))
        for call in calls
    ]
    # An answer not kept was billed all the same: the job's usage counts it (its run settles it).
    unkept = add_usage(
        *(
            billed_usage(lines.answers[call.custom_id])
            for call, was_kept in zip(calls, kept, strict=True)
            if not was_kept and call.custom_id in lines.answers
        )
    )
    if _hand_back(deps, job, batch_id, fallback=not all(kept), unkept=unkept):
        report.handed_back += 1
        return True
    return False


def _one_step_answer(
    deps: BatchPollerDependencies, calls: list[BatchCall], lines: _Lines
) -> BatchAnswer | None:
    """A one-step job's answer, fit to keep, that ends the job here (functions.batch_poller.finish);
    None for a step of a longer job, or a call left unanswered (it is handed back to fall back)."""
    if len(calls) != 1 or not calls[0].final:
        return None
    line = lines.answers.get(calls[0].custom_id)
    if line is None:
        return None
    return answer_of(line, lines.schemas.get(calls[0].custom_id), deps.validator)


def _schemas(
    deps: BatchPollerDependencies, batch: OpenBatch, provider: ProviderBatch
) -> dict[str, dict[str, Any] | None]:
    """The schema each structured call asked for, read back from the batch's input file (the batch
    keeps no request bodies); none when no call of the batch is structured."""
    if not any(call.structured for call in batch.calls):
        return {}
    return {
        str(line.get("custom_id")): schema_of(line.get("body") or {})
        for line in deps.api().lines(provider.input_file_id)
    }


def _keep(
    deps: BatchPollerDependencies,
    job: JobRecord,
    call: BatchCall,
    line: dict[str, Any] | None,
    schema: dict[str, Any] | None,
) -> bool:
    """Write the call's answer once (a result or a checkpoint); False when there is none to keep."""
    answer = answer_of(line, schema, deps.validator) if line is not None else None
    if answer is None:
        return False
    if call.final:
        result = JobResult(job_id=job.job_id, output=answer.text, usage=answer.usage)
        deps.payloads.put_result(result, stored_location(result), job.expires_at)
    else:
        step = StepOutput(job_id=job.job_id, step_id=call.step_id, output=answer.text, usage=answer.usage)
        deps.steps.put_step(step, input_expiry(deps.clock.now(), deps.settings.input_retention_hours))
    return True


def _hand_back(
    deps: BatchPollerDependencies,
    job: JobRecord,
    batch_id: str,
    *,
    fallback: bool,
    unkept: Usage | None = None,
) -> bool:
    """Pending under the hold, due now, dispatched. The claim that handed the calls off gives its
    attempt back, as a flex deferral does: a job is charged attempts for calls that failed, not for
    waiting on a batch (the next claim looks for a result all the same: functions.worker.service)."""
    now = deps.clock.now()
    transition = Transition(
        job_id=job.job_id,
        source=JobStatus.RUNNING,
        target=JobStatus.PENDING,
        now=now,
        lease_token=job.lease_token,
        dispatch_at=now,
        refund_attempt=True,
        batch_fallback=fallback,
        batch_seen=batch_id,  # its answers were kept: none of this batch's usage is late for it
        unkept_usage=unkept,
    )
    try:
        moved = deps.repository.transition(transition)
    except TransitionConflictError as conflict:
        cancel_if_requested(deps, job, conflict)
        return False
    # In its tenant's message group, as every job message is (DESIGN.md, "Fairness between tenants").
    deps.queues[Lane.of(moved)].send(JobMessage.of(moved, uuid.uuid4().hex))
    logger.info("job handed back from its batch", extra={"job_id": job.job_id, "fallback": fallback})
    return True
