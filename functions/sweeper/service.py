"""The sweeper use case: recover what the happy path lost, from the sparse index only (never a scan).

- Pending past its dispatch grace: a relay failure or a lost message. Bump dispatchAt under a
  compare (so at most one re-send per grace period), then send a new message.
- Running past its lease: a worker died. What that means is shared.leases' decision: a job
  that shared the dead invocation goes back to Pending isolated, re-sent to the isolation queue
  at no cost to its attempts; one that had the invocation to itself counts a crash, and fails
  with worker_crashed at maxCrashes (or retries_exhausted when its attempts are spent).
- CancellationRequested past its lease: the holder died before its next check. Canceled.

Every terminal write sets the input's expiry first (shared.retention), so a failure between the
two leaves the job in the index for the next sweep to finish, never an ended job whose input
outlives its retention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from functions.sweeper.budgets import repair_budgets
from functions.sweeper.dependencies import SweeperDependencies
from shared import resources as r
from shared.clock import truncate_to_millis
from shared.documents.pin_repair import repair_pins
from shared.fairness import message_group
from shared.job import JobError, JobRecord
from shared.job_errors import job_error
from shared.leases import ExpiredLeaseOutcome, expired_lease_outcome
from shared.lifecycle import TERMINAL, JobStatus
from shared.observability import current_trace_id, logger, metrics
from shared.ports import JobMessage, Lane, Transition, TransitionConflictError
from shared.retention import end_input, input_expiry, input_needs_renewal

RETRIES_EXHAUSTED = job_error("retries_exhausted")


@dataclass
class SweepReport:
    """What one sweep did, by kind of recovery."""

    redispatched: int = 0
    expired_leases: int = 0
    isolated: int = 0  # of the expired leases and failures: jobs sent to run alone from now on
    deferred: int = 0  # watched jobs not due yet (running, backing off): their next look moved
    canceled: int = 0
    failed: int = 0
    skipped: int = 0
    examined: int = 0
    errors: int = 0
    # Budget reservations settled or released that nothing else would (functions.sweeper.budgets).
    budget_repairs: int = 0
    # Document pins removed whose job had ended or never was written (shared.documents.pin_repair).
    pin_repairs: int = 0
    job_ids: list[str] = field(default_factory=list)

    @property
    def recoveries(self) -> int:
        """Jobs this sweep moved."""
        return self.redispatched + self.expired_leases + self.canceled + self.failed


class SweepIncompleteError(Exception):
    """Some shards or jobs could not be looked at; the rest of the sweep was done."""


def sweep(deps: SweeperDependencies) -> SweepReport:
    """One pass over every shard of the sweeper index, each shard getting an equal share of
    max_items_per_run, so a backlog in one shard never starves the others.

    A shard or job that fails (throttling, a malformed item) is logged and passed over, so it
    cannot hold up the rest; the sweep then ends in SweepIncompleteError, which the function's
    Errors alarm sees. Every step is idempotent, so the next run simply tries again.
    """
    report = SweepReport()
    now = truncate_to_millis(deps.clock.now())
    per_shard = max(1, deps.settings.max_items_per_run // r.SWEEP_SHARDS)
    for shard in range(r.SWEEP_SHARDS):
        try:
            candidates = deps.repository.sweep_candidates(str(shard), now, per_shard)
        except Exception:  # noqa: BLE001 - logged; one shard must not hold up the others
            logger.exception("sweeper could not read a shard", extra={"shard": shard})
            report.errors += 1
            continue
        for job_id in candidates:
            report.examined += 1
            try:
                _recover(deps, job_id, now, report)
            except Exception:  # noqa: BLE001 - logged; one job must not hold up the rest
                logger.exception("sweeper could not recover a job", extra={"job_id": job_id})
                report.errors += 1
    report.budget_repairs, budget_errors = repair_budgets(deps, now)
    report.errors += budget_errors
    pins = repair_pins(
        deps.documents,
        deps.repository.get_job,
        now=now,
        grace=timedelta(seconds=deps.settings.dispatch_grace_seconds),
        shards=r.DOCUMENTS_PIN_SHARDS,
        per_shard=max(1, deps.settings.max_items_per_run // r.DOCUMENTS_PIN_SHARDS),
    )
    report.pin_repairs = pins.unpinned
    report.errors += pins.errors
    metrics.add_metric(name="SweeperRecoveries", unit="Count", value=report.recoveries)
    logger.info(
        "sweep done",
        extra={
            "examined": report.examined,
            "redispatched": report.redispatched,
            "expired_leases": report.expired_leases,
            "isolated": report.isolated,
            "deferred": report.deferred,
            "canceled": report.canceled,
            "failed": report.failed,
            "budget_repairs": report.budget_repairs,
            "pin_repairs": report.pin_repairs,
            "errors": report.errors,
        },
    )
    if report.errors:
        raise SweepIncompleteError(f"{report.errors} shards or jobs could not be swept; see the log")
    return report


_LEASED = frozenset({JobStatus.RUNNING, JobStatus.CANCELLATION_REQUESTED})


def _recover(deps: SweeperDependencies, job_id: str, now: datetime, report: SweepReport) -> None:
    job = deps.repository.get_job(job_id)
    if job is None:
        return
    try:
        moved = _step(deps, job, now, report)
    except TransitionConflictError:
        moved = False  # it moved on by itself between our read and our write: nothing to recover
    if moved:
        report.job_ids.append(job_id)
    else:
        report.skipped += 1


def _step(deps: SweeperDependencies, job: JobRecord, now: datetime, report: SweepReport) -> bool:
    if job.status is JobStatus.PENDING:
        return _recover_pending(deps, job, now, report)
    if job.status in _LEASED:
        return _recover_leased(deps, job, now, report)
    return False


def _recover_pending(deps: SweeperDependencies, job: JobRecord, now: datetime, report: SweepReport) -> bool:
    grace = timedelta(seconds=deps.settings.dispatch_grace_seconds)
    look = timedelta(seconds=deps.settings.sweep_look_seconds)
    if job.stalls >= job.max_attempts:
        _write(deps, job, JobStatus.FAILED, now, error=RETRIES_EXHAUSTED)
        report.failed += 1
        return True
    if job.dispatch_at + grace > now:
        # Claimed and released with backoff, or not yet past its grace: look again when it is
        # (the claims and releases leave the index alone, so this is what keeps it current).
        deps.repository.defer_sweep(job, job.dispatch_at + grace)
        report.deferred += 1
        return False
    _renew_input_of_old_job(deps, job, now)
    bumped = deps.repository.bump_dispatch(job, now, now + look)
    _dispatch(deps, bumped)
    report.redispatched += 1
    return True


def _recover_leased(deps: SweeperDependencies, job: JobRecord, now: datetime, report: SweepReport) -> bool:
    look = timedelta(seconds=deps.settings.sweep_look_seconds)
    if job.lease_expires_at is not None and job.lease_expires_at > now:
        # A live lease: look again in one look's time, which is within a look of the lease's end
        # whenever it ends, so a crash is found in time and a long run costs one deferral per look.
        deps.repository.defer_sweep(job, now + look)
        report.deferred += 1
        return False
    outcome = expired_lease_outcome(job, deps.settings.max_crashes)
    if outcome.dispatches:
        _renew_input_of_old_job(deps, job, now)
    written = _write(
        deps,
        job,
        outcome.target,
        now,
        error=job_error(outcome.error_code) if outcome.error_code else None,
        dispatch_at=now if outcome.dispatches else None,
        sweep_at=now + look if outcome.dispatches else None,
        outcome=outcome,
    )
    _release_slot(deps, job)
    if outcome.target is JobStatus.CANCELED:
        report.canceled += 1
    elif outcome.target is JobStatus.FAILED:
        report.failed += 1
    else:
        _dispatch(deps, written)
        report.expired_leases += 1
    if outcome.isolate and not job.isolated:
        report.isolated += 1
    return True


def _release_slot(deps: SweeperDependencies, job: JobRecord) -> None:
    """The expired claim's running slot, freed early by its own token (it would free itself at
    its expiry anyway; a slot another claim took since is not this token's to free)."""
    if job.slot is None or job.lease_token is None:
        return
    try:
        deps.slots.release(message_group(job.tenant), job.slot, job.lease_token)
    except Exception:  # noqa: BLE001 - best effort: the slot's own expiry frees it
        logger.warning("the expired claim's running slot was not released", extra={"job_id": job.job_id})


def _write(
    deps: SweeperDependencies,
    job: JobRecord,
    target: JobStatus,
    now: datetime,
    *,
    error: JobError | None = None,
    dispatch_at: datetime | None = None,
    sweep_at: datetime | None = None,
    outcome: ExpiredLeaseOutcome | None = None,
) -> JobRecord:
    moved = (
        end_input(deps.payloads, job, target, now, deps.settings.input_retention_hours)
        if target in TERMINAL
        else None
    )
    written = deps.repository.transition(
        Transition(
            job_id=job.job_id,
            source=job.status,
            target=target,
            now=now,
            lease_token=job.lease_token,
            # The read said the lease had expired; a heartbeat since then means its holder is
            # alive, and taking the job now would run it twice (or fail a job still progressing).
            require_lease_expired=job.status in _LEASED,
            isolate=outcome.isolate if outcome else False,
            count_crash=outcome.count_crash if outcome else False,
            refund_stall=outcome.refund_stall if outcome else False,
            error=error,
            dispatch_at=dispatch_at,
            sweep_at=sweep_at,
            input_location=moved,
        )
    )
    logger.info(
        "sweeper moved a job",
        extra={
            "job_id": job.job_id,
            "from": job.status.value,
            "to": target.value,
            "isolated": written.isolated,
            "crashes": written.crashes,
        },
    )
    return written


def _renew_input_of_old_job(deps: SweeperDependencies, job: JobRecord, now: datetime) -> None:
    retention = deps.settings.input_retention_hours
    if input_needs_renewal(job, now, retention):
        deps.payloads.set_input_expiry(job.job_id, job.input_location, input_expiry(now, retention))


def _dispatch(deps: SweeperDependencies, job: JobRecord) -> None:
    # A crash before this send leaves the job Pending with a fresh sweepAt: the next period re-sends it.
    deps.queues[Lane.of(job)].send(JobMessage.of(job, current_trace_id()))
