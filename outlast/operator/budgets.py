"""Token budgets for operators (AWS credentials, never the API): limits, what they show, and the
reservation an operator redrive makes for the run it starts (DESIGN.md, "Token budgets").

A redrive is a new run of a job, so it reserves again, exactly as a submit does: the run's true
upper bound (the job's plan, from its stored input and plan parameters), in the current month,
under the tenant's limit. Before that, the run that ended is settled if nothing settled it yet
(its notifier record was lost and the sweeper has not come by), so no run is ever left
unsettled behind a later one. A run whose input is gone reserves nothing: it fails with
input_missing before any model call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.budgets import (
    BudgetState,
    ReservationRef,
    ReserveOutcome,
    effective_limit,
    exceeded_detail,
    new_reservation,
    period_end,
    period_of,
    reservation_ref,
    reservation_tokens,
    run_usage_tokens,
    settle_job,
)
from shared.job import BudgetHold, JobRecord
from shared.planner import plan_of
from shared.ports import PayloadStore

# How long a redrive's reservation waits for the redrive's write before the sweeper may release
# it: the same day a submit's claim lives (an operator run that stopped in between is rerun).
REDRIVE_HOLD = timedelta(hours=24)


class BudgetRefusedError(Exception):
    """The redriven run's upper bound does not fit its tenant's budget: nothing was reserved."""


@dataclass(frozen=True)
class TenantBudget:
    """What `outlast ops budgets show` prints for one tenant and period."""

    tenant: str
    period: str
    configured_limit: int | None  # the tenant's own (None: the stage default applies)
    limit: int | None  # in force (None: no limit)
    used: int
    reserved: int

    @property
    def remaining(self) -> int | None:
        """What new jobs may still reserve (None: no limit)."""
        return None if self.limit is None else max(0, self.limit - self.used - self.reserved)

    @property
    def resets_at(self) -> datetime:
        """When the period ends."""
        return period_end(self.period)


class OperatorBudgets:
    """The budgets table through the functions' own ledger adapter, with the stage default."""

    def __init__(
        self, ledger: DynamoBudgetLedger, payloads: PayloadStore, default_monthly_tokens: int
    ) -> None:
        self.ledger = ledger
        self._payloads = payloads
        self.default_monthly_tokens = default_monthly_tokens

    # --- limits --------------------------------------------------------------------------------

    def show(self, tenant: str, period: str) -> TenantBudget:
        """One tenant's budget in one period."""
        return self._view(self.ledger.state(tenant, period))

    def show_all(self, period: str) -> list[TenantBudget]:
        """Every tenant with a limit or a counter (a scan of the table's tenant items)."""
        return [self.show(tenant, period) for tenant in sorted(self.ledger.tenants())]

    def set_limit(self, tenant: str, monthly_tokens: int | None, now: datetime) -> TenantBudget:
        """The tenant's own limit (0: none; None: drop it, the stage default applies); what it is now."""
        if monthly_tokens is None:
            self.ledger.clear_limit(tenant)
        else:
            self.ledger.set_limit(tenant, monthly_tokens, now)
        return self.show(tenant, period_of(now))

    def _view(self, state: BudgetState) -> TenantBudget:
        return TenantBudget(
            tenant=state.tenant,
            period=state.period,
            configured_limit=state.configured_limit,
            limit=effective_limit(state.configured_limit, self.default_monthly_tokens),
            used=state.used,
            reserved=state.reserved,
        )

    # --- redrives ------------------------------------------------------------------------------

    def reserve_redrive(self, job: JobRecord, now: datetime, grace: timedelta) -> BudgetHold | None:
        """Settle the ended run if nothing did, then reserve the next run's bound; its hold (None:
        nothing to hold). Raises BudgetRefusedError when the bound does not fit."""
        ended = reservation_ref(job)
        if ended is not None and self.ledger.open_reservations([ended]):
            settle_job(self.ledger, job)
        period = period_of(now)
        state = self.ledger.state(job.tenant, period)
        limit = effective_limit(state.configured_limit, self.default_monthly_tokens)
        if limit is None:
            return None
        job_input = self._payloads.get_input(job.job_id, job.input_location)
        if job_input is None:
            return None
        plan = plan_of(job, job_input)
        reservation = new_reservation(
            job.tenant,
            # The run the redrive starts is the job's redriveCount after it (one more than now).
            ReservationRef(job.job_id, job.redrive_count + 1),
            reservation_tokens(plan),
            now=now,
            period=period,
            held_until=now + REDRIVE_HOLD,
            grace=grace,
            # What the runs so far settle: late tokens are the poller's to count (settle_late).
            base_tokens=run_usage_tokens(job),
        )
        result = self.ledger.reserve(reservation, limit)
        if result.outcome is ReserveOutcome.EXCEEDED:
            committed = result.committed if result.committed is not None else state.committed
            raise BudgetRefusedError(
                f"tenant {job.tenant}: " + exceeded_detail(limit, committed, reservation.tokens, period)
            )
        return result.hold(reservation)
