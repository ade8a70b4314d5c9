"""Token budgets per tenant and calendar month (DESIGN.md, "Token budgets: reserve, then settle").

Pure domain code: the ledger is a port (`shared.budget_ports.BudgetLedger`), so every rule here
is tested with a fake, and the DynamoDB adapter only has to keep the conditions.

- A tenant's limit is its own (set by an operator) or the stage default; 0 means no limit, and a
  tenant without a limit pays no budget write at all.
- Reserve first: before a run can cost anything, one reservation of its true upper bound
  (`shared.planner.token_bound`) is written together with the period's counter, under
  `used + reserved + r <= limit`; the reservation's key is (job, run), so a repeated submit of the
  same job can never reserve twice.
- Settle once: when the run is terminal, its reservation goes and its usage comes in, in the
  same conditional write, in the period it reserved in: `reserved -= r`, `used += usage`. The
  reservation is the marker: a settlement whose reservation is gone was already made.
- Late usage: what a provider batch billed for answers to a job that had moved on comes onto the
  ended job and into `used` once per (job, batch) (`settle_late`), apart from the run's
  settlement, which leaves those tokens out (`run_usage_tokens`): the two never count them twice,
  in whichever order they are made.
- Repair: a reservation that nothing settles (a crash after reserving, a lost stream record) is
  found by the sweeper, which settles, releases or looks again later (`repair_for`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from shared.budget_ports import BudgetLedger
from shared.clock import to_iso
from shared.contract import BudgetDocument, StatusDocument
from shared.job import BudgetHold, JobRecord, JobSummary, Usage
from shared.lifecycle import is_terminal
from shared.observability import logger, metrics

if TYPE_CHECKING:
    from shared.planner import StepPlan

# A limit of 0 tokens: no limit (the stage default's default, and `budgets set --unlimited`).
UNLIMITED = 0
# The sweeper's shards of open reservations (a sparse index): a burst of submits spreads over
# them, and each sweep reads each shard once.
RESERVATION_SHARDS = 4
# Warn when a tenant's committed tokens (used + reserved) pass this share of its limit.
NEAR_LIMIT_PERCENT = 80


# --- periods ----------------------------------------------------------------------------------


def period_of(instant: datetime) -> str:
    """The calendar month (UTC) an instant falls in, as `YYYY-MM`."""
    return instant.astimezone(UTC).strftime("%Y-%m")


def period_start(period: str) -> datetime:
    """The first instant of a period."""
    return datetime.strptime(period, "%Y-%m").replace(tzinfo=UTC)


def period_end(period: str) -> datetime:
    """The first instant of the next period: when this one resets."""
    start = period_start(period)
    return (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )


# --- limits and bounds ------------------------------------------------------------------------


def effective_limit(configured: int | None, stage_default: int) -> int | None:
    """The tenant's limit: its own when an operator set one, else the stage's; None: no limit."""
    limit = stage_default if configured is None else configured
    return None if limit == UNLIMITED else limit


def reservation_tokens(plan: StepPlan) -> int:
    """What one run of the plan reserves: the true upper bound of every call it makes."""
    # Imported here: only submit and a redrive reserve, and they have planned already; status,
    # the notifier and the sweeper read budgets without the planner (cold start).
    from shared.planner import token_bound  # noqa: PLC0415

    return token_bound(plan)


def usage_tokens(usage: Usage | None) -> int:
    """Input plus output tokens, 0 when nothing reported usage."""
    return usage.input_tokens + usage.output_tokens if usage is not None else 0


def run_usage_tokens(job: JobRecord) -> int:
    """The job's tokens that its runs' settlements count: its usage less its late tokens.

    Late tokens (a batch's answers to a job that had moved on, JobRecord.late_tokens) are on the
    job's usage, but come into the budget by `settle_late`, once per (job, batch). Leaving them out
    here makes a run's settlement the same whether it reads the job before or after they arrived,
    and so is a redrive's base (what earlier runs settled), whenever they arrive.
    """
    return max(0, usage_tokens(job.usage) - job.late_tokens)


@dataclass(frozen=True)
class BudgetState:
    """One tenant's budget in one period, as the ledger read it."""

    tenant: str
    period: str
    configured_limit: int | None  # the tenant's own limit (None: the stage default applies)
    used: int = 0
    reserved: int = 0
    # The tenant's own running cap (DESIGN.md, "Fairness between tenants"), read by the same
    # call: None when an operator set none (the stage default applies).
    configured_max_running: int | None = None

    @property
    def committed(self) -> int:
        """Used plus reserved: what the limit is checked against."""
        return self.used + self.reserved


# --- reservations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ReservationRef:
    """Which reservation: one per run of a job (the first run is 0, each operator redrive adds 1)."""

    job_id: str
    run: int


def reservation_shard(job_id: str) -> str:
    """The shard of the open-reservations index a job's reservations go to (a stable hash)."""
    return str(int(hashlib.sha256(job_id.encode()).hexdigest()[:8], 16) % RESERVATION_SHARDS)


@dataclass(frozen=True)
class Reservation:
    """One run's reserved tokens, as the ledger keeps them until the run is settled or released.

    `base_tokens` is the job's usage before this run (what its earlier runs settled);
    `held_until` is how long a run that has not appeared yet may still come to hold it (the
    submit's idempotency claim, or the operator's redrive): until then the sweeper never
    releases it; `check_at` is when the sweeper looks at it next.
    """

    ref: ReservationRef
    tenant: str
    period: str
    tokens: int
    base_tokens: int
    created_at: datetime
    held_until: datetime
    check_at: datetime

    @property
    def hold(self) -> BudgetHold:
        """What the run that holds it carries on its job."""
        return BudgetHold(
            period=self.period, tokens=self.tokens, base_tokens=self.base_tokens, run=self.ref.run
        )


class ReserveOutcome(StrEnum):
    """How a reservation went."""

    RESERVED = "reserved"  # written now, with the counter
    ALREADY_RESERVED = "already_reserved"  # an earlier attempt of the same submit (or redrive) wrote it
    EXCEEDED = "exceeded"  # it does not fit: nothing was written


@dataclass(frozen=True)
class ReserveResult:
    """A reservation's outcome; `committed` is the counter as the refusal found it (EXCEEDED only);
    `stored` the reservation an earlier attempt wrote (ALREADY_RESERVED only)."""

    outcome: ReserveOutcome
    committed: int | None = None
    stored: Reservation | None = None

    def hold(self, proposed: Reservation) -> BudgetHold:
        """What the run holds: the stored reservation when an earlier attempt made it (its tokens,
        period and base, whatever this attempt's code computed), else the one just proposed."""
        return (self.stored or proposed).hold


def new_reservation(
    tenant: str,
    ref: ReservationRef,
    tokens: int,
    *,
    now: datetime,
    period: str,
    held_until: datetime,
    grace: timedelta,
    base_tokens: int = 0,
) -> Reservation:
    """A reservation the sweeper first looks at `grace` after it was made."""
    return Reservation(
        ref=ref,
        tenant=tenant,
        period=period,
        tokens=tokens,
        base_tokens=base_tokens,
        created_at=now,
        held_until=held_until,
        check_at=now + grace,
    )


def exceeded_detail(limit: int, committed: int, tokens: int, period: str) -> str:
    """What a refused caller is told: what the job needs, what is left, and when the period resets."""
    left = max(0, limit - committed)
    return (
        f"This job may use up to {tokens:,} tokens, and {left:,} of the tenant's {limit:,} monthly "
        f"tokens are left for {period}; the budget resets at {to_iso(period_end(period))}. Tokens "
        "held by running jobs come back as they end."
    )


def record_reservation(state: BudgetState, limit: int, reservation: Reservation) -> None:
    """The metric and log line of a reservation: the share of the limit the tenant has committed."""
    committed = state.committed + reservation.tokens
    percent = committed * 100 / limit
    metrics.add_metric(name="BudgetCommittedPercent", unit="Percent", value=percent)
    if percent >= NEAR_LIMIT_PERCENT:
        logger.warning(
            "tenant budget near its limit",
            extra={"tenant": state.tenant, "period": state.period, "committed": committed, "limit": limit},
        )


def record_refusal(tenant: str, period: str, limit: int, committed: int | None, tokens: int) -> None:
    """The metric and log line of a refusal: the tenant's next job did not fit (it reached 100%)."""
    metrics.add_metric(name="BudgetExceeded", unit="Count", value=1)
    logger.warning(
        "tenant budget exhausted",
        extra={"tenant": tenant, "period": period, "limit": limit, "committed": committed, "tokens": tokens},
    )


# --- settlement -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settlement:
    """One run's settlement: its reservation goes (`reserved -= reserved_tokens`) and its usage
    comes in (`used += used_tokens`), in the period it reserved in."""

    ref: ReservationRef
    tenant: str
    period: str
    reserved_tokens: int
    used_tokens: int


def settlement_for(job: JobRecord) -> Settlement | None:
    """The settlement of the job's current run, once it is terminal; None when there is nothing to settle.

    The run's usage is the job's usage less what earlier runs settled: a one-step job's usage adds
    up over runs, and a multi-step job's is the sum of its checkpoints, which a redrive adopts.
    Late tokens are left out (`run_usage_tokens`): `settle_late` counts them.
    """
    hold = job.budget
    if hold is None or not is_terminal(job.status):
        return None
    return Settlement(
        ref=ReservationRef(job.job_id, hold.run),
        tenant=job.tenant,
        period=hold.period,
        reserved_tokens=hold.tokens,
        used_tokens=max(0, run_usage_tokens(job) - hold.base_tokens),
    )


def settle_job(ledger: BudgetLedger, job: JobRecord) -> bool:
    """Settle the job's run if it is terminal and holds a reservation: at most once, however often
    this is called (duplicate stream records, retries, the sweeper, a redrive). True when this call
    settled it."""
    settlement = settlement_for(job)
    if settlement is None:
        return False
    return apply_settlement(ledger, settlement)


def apply_settlement(ledger: BudgetLedger, settlement: Settlement) -> bool:
    """Make one settlement; its metrics and log line when this call was the one that made it."""
    if not ledger.settle(settlement):
        return False
    metrics.add_metric(name="BudgetSettlements", unit="Count", value=1)
    metrics.add_metric(name="BudgetSettledTokens", unit="Count", value=settlement.used_tokens)
    extra = {
        "job_id": settlement.ref.job_id,
        "run": settlement.ref.run,
        "tenant": settlement.tenant,
        "period": settlement.period,
        "reserved": settlement.reserved_tokens,
        "used": settlement.used_tokens,
    }
    if settlement.used_tokens > settlement.reserved_tokens:
        # The bound was not a bound (shared.planner's REREAD factor, or two claims that both called
        # the model for one step): the usage is counted in full all the same.
        metrics.add_metric(name="BudgetOverruns", unit="Count", value=1)
        logger.warning("a run used more tokens than it reserved", extra=extra)
    else:
        logger.info("budget settled", extra=extra)
    return True


@dataclass(frozen=True)
class LateUsage:
    """Usage the provider billed after the job's run was settled: the answers a provider batch gave
    a job that had moved on (canceled, DESIGN.md "Cost tiers"). It comes into `used` once per (job,
    batch), in the period the run reserved in; no reservation goes."""

    job_id: str
    batch_id: str
    tenant: str
    period: str
    tokens: int


def late_usage_for(job: JobRecord, batch_id: str, usage: Usage) -> LateUsage | None:
    """The budget's share of a batch's late usage on a job; None when the job's run holds no
    reservation (its tenant has no limit: no budget write at all) or nothing was billed."""
    tokens = usage_tokens(usage)
    if job.budget is None or tokens == 0:
        return None
    return LateUsage(job.job_id, batch_id, job.tenant, job.budget.period, tokens)


def settle_late(ledger: BudgetLedger, late: LateUsage) -> bool:
    """Count late usage once (the ledger keeps a marker per (job, batch)); True when this call did."""
    if not ledger.settle_late(late):
        return False
    metrics.add_metric(name="BudgetLateTokens", unit="Count", value=late.tokens)
    logger.info(
        "late usage settled",
        extra={
            "job_id": late.job_id,
            "batch_id": late.batch_id,
            "tenant": late.tenant,
            "tokens": late.tokens,
        },
    )
    return True


# --- repair (the sweeper) ---------------------------------------------------------------------


class RepairKind(StrEnum):
    """What the sweeper does with a reservation that is due."""

    SETTLE = "settle"  # its run ended and nothing settled it
    RELEASE = "release"  # no run holds it, and none can come to hold it any more
    DEFER = "defer"  # its run is still going, or may still appear: look again at `until`


@dataclass(frozen=True)
class Repair:
    """The sweeper's decision for one reservation."""

    kind: RepairKind
    settlement: Settlement | None = None
    until: datetime | None = None


def repair_for(reservation: Reservation, job: JobRecord | None, now: datetime, grace: timedelta) -> Repair:
    """Decide a due reservation from the job as read (None: there is no job).

    - Its run is the job's current run: settle once the job is terminal (with the job's usage less
      what earlier runs settled), else look again a grace later.
    - The job has moved on to a later run while this one was never settled: release it, counting
      nothing. outlast's own redrive settles the ended run before it starts the next, so only a
      redrive made by hand gets here, and what the run used can no longer be told apart from what
      later runs used (counting it from the later run's base could count a run twice).
    - No run holds it: a submit or redrive that stopped after reserving may still complete (its
      idempotency claim, or the operator's run, lives until `held_until`); after that and a grace
      none can, so release it. A job whose first run exists without holding it never will:
      release at once.
    """
    ref = reservation.ref
    hold = job.budget if job is not None else None
    if job is not None and hold is not None and hold.run == ref.run:
        if not is_terminal(job.status):
            return Repair(RepairKind.DEFER, until=now + grace)
        settlement = Settlement(
            ref=ref,
            tenant=reservation.tenant,
            period=reservation.period,
            reserved_tokens=reservation.tokens,
            used_tokens=max(0, run_usage_tokens(job) - reservation.base_tokens),
        )
        return Repair(RepairKind.SETTLE, settlement)
    if job is not None and (ref.run == 0 or (hold is not None and hold.run > ref.run)):
        return Repair(RepairKind.RELEASE)
    free_at = reservation.held_until + grace
    if free_at <= now:
        return Repair(RepairKind.RELEASE)
    return Repair(RepairKind.DEFER, until=free_at)


# --- what callers see -------------------------------------------------------------------------


def budget_document(state: BudgetState, stage_default: int) -> BudgetDocument:
    """GET /v1/budget: the caller's tenant this period."""
    limit = effective_limit(state.configured_limit, stage_default)
    return BudgetDocument(
        period=state.period,
        limit_tokens=limit,
        used_tokens=state.used,
        reserved_tokens=state.reserved,
        remaining_tokens=None if limit is None else max(0, limit - state.committed),
        resets_at=period_end(state.period),
    )


def reservation_ref(job: JobSummary) -> ReservationRef | None:
    """The reservation the job's current run holds, if any."""
    return ReservationRef(job.job_id, job.budget.run) if job.budget is not None else None


def documents(ledger: BudgetLedger, jobs: Collection[JobSummary]) -> list[StatusDocument]:
    """The jobs' status documents, each ended job's `reservedTokens` as the ledger has it.

    A job that has not ended holds its reservation for certain; for an ended one, the ledger is
    asked (one read for all of them) whether its run is settled yet. Jobs without a hold cost nothing.
    """
    ended = [ref for job in jobs if is_terminal(job.status) and (ref := reservation_ref(job)) is not None]
    still_open = ledger.open_reservations(ended) if ended else set()
    return [
        job.status_document(
            settled=reservation_ref(job) not in still_open if is_terminal(job.status) else None
        )
        for job in jobs
    ]


def document(ledger: BudgetLedger, job: JobSummary) -> StatusDocument:
    """One job's status document (see `documents`)."""
    return documents(ledger, [job])[0]
