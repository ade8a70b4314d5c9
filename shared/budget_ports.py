"""The budget ledger port (DESIGN.md, "Token budgets"); the DynamoDB adapter is
shared.adapters.dynamodb_budgets, the fake tests/budget_fakes.py."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from shared.budgets import (
        BudgetState,
        LateUsage,
        Reservation,
        ReservationRef,
        ReserveResult,
        Settlement,
    )


class BudgetLedger(Protocol):
    """Per-tenant, per-month token counters and one reservation per run of a job.

    Every change is one conditional write of the counter together with the reservation (a
    transaction), so the counter never moves without its reservation appearing or going: a
    reservation cannot be made twice, nor settled or released twice.
    """

    def state(self, tenant: str, period: str) -> BudgetState:
        """The tenant's own limit (if an operator set one) and the period's counter, in one read."""
        ...

    def reserve(self, reservation: Reservation, limit: int) -> ReserveResult:
        """Write the reservation and add its tokens to the period's reserved, only while
        `used + reserved + tokens <= limit` and the reservation does not exist yet."""
        ...

    def settle(self, settlement: Settlement) -> bool:
        """Close the run's reservation and move its tokens: reserved -= reserved_tokens, used +=
        used_tokens. False when it is not open (settled or released already)."""
        ...

    def settle_late(self, late: LateUsage) -> bool:
        """used += tokens, together with the (job, batch) marker, only while the marker does not
        exist: False when this late usage was counted already."""
        ...

    def release(self, reservation: Reservation) -> bool:
        """Close a reservation nothing will settle and give its tokens back (it counts 0 used).
        False when it is not open."""
        ...

    def due(self, shard: str, due_by: datetime, limit: int) -> list[Reservation]:
        """Open reservations in one shard whose check time is at or before `due_by`, oldest first."""
        ...

    def defer(self, reservation: Reservation, check_at: datetime) -> None:
        """Look at an open reservation again at `check_at` (nothing when it is gone)."""
        ...

    def open_reservations(self, refs: Collection[ReservationRef]) -> set[ReservationRef]:
        """Which of these reservations are still open (not settled or released)."""
        ...

    def settled_runs(self, job_id: str) -> dict[int, int]:
        """What the ledger counted as used for each closed run of a job (a released run: 0), by
        run; open runs are not in it. A closed reservation is kept as this record until its TTL."""
        ...
