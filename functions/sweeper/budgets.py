"""The sweeper's budget repair (DESIGN.md, "Token budgets"): reservations nothing settled.

Open reservations carry the keys of a sparse, sharded index on the budgets table (never a scan),
each due a grace after it was made: most are settled by the notifier long before, and leave the
index then. Those still there when due are decided by `shared.budgets.repair_for` from the job
(one read of it): settled when the run ended but its settlement was lost (the notifier gave up on
its record), released when no run holds it or can come to (a submit that crashed after reserving
and whose claim expired), or looked at again later (a job still running, a claim still alive).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from functions.sweeper.dependencies import SweeperDependencies
from shared.budgets import RESERVATION_SHARDS, RepairKind, Reservation, apply_settlement, repair_for
from shared.observability import logger, metrics


def repair_budgets(deps: SweeperDependencies, now: datetime) -> tuple[int, int]:
    """One pass over every shard of open reservations that are due; (repaired, errors)."""
    per_shard = max(1, deps.settings.max_items_per_run // RESERVATION_SHARDS)
    grace = timedelta(seconds=deps.settings.dispatch_grace_seconds)
    repaired = errors = 0
    for shard in range(RESERVATION_SHARDS):
        try:
            due = deps.budgets.due(str(shard), now, per_shard)
        except Exception:  # noqa: BLE001 - logged; one shard must not hold up the others
            logger.exception("sweeper could not read open reservations", extra={"shard": shard})
            errors += 1
            continue
        for reservation in due:
            try:
                repaired += _repair(deps, reservation, now, grace)
            except Exception:  # noqa: BLE001 - logged; one reservation must not hold up the rest
                logger.exception(
                    "sweeper could not repair a reservation", extra={"job_id": reservation.ref.job_id}
                )
                errors += 1
    if repaired:
        metrics.add_metric(name="BudgetRepairs", unit="Count", value=repaired)
    return repaired, errors


def _repair(deps: SweeperDependencies, reservation: Reservation, now: datetime, grace: timedelta) -> int:
    job = deps.repository.get_job(reservation.ref.job_id)
    repair = repair_for(reservation, job, now, grace)
    extra = {"job_id": reservation.ref.job_id, "run": reservation.ref.run, "tenant": reservation.tenant}
    if repair.kind is RepairKind.DEFER and repair.until is not None:
        deps.budgets.defer(reservation, repair.until)
        return 0
    if repair.kind is RepairKind.SETTLE and repair.settlement is not None:
        settled = apply_settlement(deps.budgets, repair.settlement)
        if settled:
            logger.warning("sweeper settled a reservation the notifier did not", extra=extra)
        return int(settled)
    released = deps.budgets.release(reservation)
    if released:
        logger.warning("sweeper released a reservation no run holds", extra=extra)
    return int(released)
