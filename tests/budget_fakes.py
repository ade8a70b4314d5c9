"""An in-memory BudgetLedger with the DynamoDB adapter's conditions (shared.adapters.dynamodb_budgets).

Each method is one atomic step under a lock, as each transaction is in DynamoDB, so use cases
that race each other see what they would see against the table. Successful writes are appended
to `writes`; subclass and override a method to inject a fault.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import datetime

from shared.budgets import (
    BudgetState,
    LateUsage,
    Reservation,
    ReservationRef,
    ReserveOutcome,
    ReserveResult,
    Settlement,
    reservation_shard,
)


@dataclass
class Counter:
    """One tenant's counter in one period."""

    used: int = 0
    reserved: int = 0


@dataclass
class InMemoryBudgetLedger:
    """BudgetLedger in dictionaries, condition for condition like DynamoBudgetLedger."""

    limits: dict[str, int] = field(default_factory=dict)
    max_running: dict[str, int] = field(default_factory=dict)  # tenants' own running caps
    counters: dict[tuple[str, str], Counter] = field(default_factory=dict)
    reservations: dict[ReservationRef, Reservation] = field(default_factory=dict)  # the open ones
    # Closed reservations (settled or released), with what each counted as used.
    closed: dict[ReservationRef, tuple[Reservation, int]] = field(default_factory=dict)
    # Late usage counted, by (job, batch): the markers.
    late: dict[tuple[str, str], int] = field(default_factory=dict)
    writes: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def state(self, tenant: str, period: str) -> BudgetState:
        """The tenant's own limit and the period's counter."""
        with self._lock:
            self.reads.append("state")
            counter = self.counters.get((tenant, period), Counter())
            return BudgetState(
                tenant,
                period,
                self.limits.get(tenant),
                counter.used,
                counter.reserved,
                configured_max_running=self.max_running.get(tenant),
            )

    def reserve(self, reservation: Reservation, limit: int) -> ReserveResult:
        """attribute_not_exists(reservation) AND committed <= limit - tokens, both or neither."""
        with self._lock:
            stored = self.reservations.get(reservation.ref) or self.closed.get(reservation.ref, (None, 0))[0]
            if stored is not None:
                return ReserveResult(ReserveOutcome.ALREADY_RESERVED, stored=stored)
            counter = self.counters.get((reservation.tenant, reservation.period), Counter())
            if reservation.tokens > limit or counter.used + counter.reserved > limit - reservation.tokens:
                committed = counter.used + counter.reserved
                return ReserveResult(
                    ReserveOutcome.EXCEEDED, committed=committed if reservation.tokens <= limit else None
                )
            counter.reserved += reservation.tokens
            self.counters[(reservation.tenant, reservation.period)] = counter
            self.reservations[reservation.ref] = reservation
            self.writes.append("reserve")
            return ReserveResult(ReserveOutcome.RESERVED)

    def settle(self, settlement: Settlement) -> bool:
        """Close the reservation (while it is open, for these tokens); reserved -= r, used += u."""
        return self._close(
            settlement.ref,
            settlement.tenant,
            settlement.period,
            settlement.reserved_tokens,
            settlement.used_tokens,
            kind="settle",
        )

    def release(self, reservation: Reservation) -> bool:
        """Close the reservation, counting 0 used; reserved -= r."""
        return self._close(
            reservation.ref, reservation.tenant, reservation.period, reservation.tokens, 0, kind="release"
        )

    def due(self, shard: str, due_by: datetime, limit: int) -> list[Reservation]:
        """Open reservations of the shard due by `due_by`, oldest check first."""
        with self._lock:
            self.reads.append("due")
            found = sorted(
                (
                    reservation
                    for reservation in self.reservations.values()
                    if reservation_shard(reservation.ref.job_id) == shard and reservation.check_at <= due_by
                ),
                key=lambda reservation: reservation.check_at,
            )
            return found[:limit]

    def defer(self, reservation: Reservation, check_at: datetime) -> None:
        """Move the check time of an open reservation."""
        with self._lock:
            current = self.reservations.get(reservation.ref)
            if current is not None:
                self.reservations[reservation.ref] = replace(current, check_at=check_at)
                self.writes.append("defer")

    def open_reservations(self, refs: Collection[ReservationRef]) -> set[ReservationRef]:
        """Which are still open."""
        with self._lock:
            self.reads.append("open_reservations")
            return {ref for ref in refs if ref in self.reservations}

    def settle_late(self, late: LateUsage) -> bool:
        """used += tokens with the (job, batch) marker, once."""
        with self._lock:
            if (late.job_id, late.batch_id) in self.late:
                return False
            self.late[(late.job_id, late.batch_id)] = late.tokens
            self.counters.setdefault((late.tenant, late.period), Counter()).used += late.tokens
            self.writes.append("settle_late")
            return True

    def settled_runs(self, job_id: str) -> dict[int, int]:
        """What each closed run of the job counted as used."""
        with self._lock:
            self.reads.append("settled_runs")
            return {ref.run: used for ref, (_, used) in self.closed.items() if ref.job_id == job_id}

    def counter(self, tenant: str, period: str) -> Counter:
        """The counter as it stands (a copy)."""
        with self._lock:
            current = self.counters.get((tenant, period), Counter())
            return Counter(current.used, current.reserved)

    def _close(
        self, ref: ReservationRef, tenant: str, period: str, reserved: int, used: int, *, kind: str
    ) -> bool:
        with self._lock:
            current = self.reservations.get(ref)
            if current is None or current.tokens != reserved:
                return False
            self.closed[ref] = (self.reservations.pop(ref), used)
            counter = self.counters.setdefault((tenant, period), Counter())
            counter.reserved -= reserved
            counter.used += used
            self.writes.append(kind)
            return True
