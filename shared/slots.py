"""Running slots: a strict per-tenant cap on jobs running at once (DESIGN.md, "Fairness between tenants").

A tenant capped at N owns N slot items, (group, k) for k < N. A claim takes a free one (absent,
or its lease expired) with a conditional write carrying the claim's lease token and expiry,
before the job's own claim; heartbeats extend it; only that token releases it. The slot's
expiry is the lease's, so a killed worker's slot frees itself when its lease would have
expired, with no sweeper involved (the sweeper releases it early once it expired the lease).
No boto3 here: the port, the pure choices, and nothing else.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from shared.errors import ConditionFailedError
from shared.ports import Lease


class SlotLostError(ConditionFailedError):
    """The slot is no longer held by this token (it expired and another claim took it)."""

    def __init__(self) -> None:
        super().__init__("The running slot was taken over after its lease expired.")


class SlotStore(Protocol):
    """Slots of capped tenants; every write conditional on the slot's token or its expiry."""

    def take(self, group: str, slot: int, lease: Lease, now: datetime) -> bool:
        """Hold (group, slot) for `lease` if it is absent or expired at `now`; False when it is held."""
        ...

    def extend(self, group: str, slot: int, lease: Lease) -> None:
        """Move the slot's expiry to the lease's; SlotLostError when `lease.token` does not hold it."""
        ...

    def release(self, group: str, slot: int, token: str) -> bool:
        """Free the slot only if `token` holds it; False when it does not (already free, or another's)."""
        ...


def slot_order(cap: int, rng: random.Random | None = None) -> Sequence[int]:
    """The slots a claim tries, from a random one round: concurrent claims spread over the free
    slots instead of all racing for slot 0 first."""
    start = (rng or random).randrange(cap)
    return [(start + offset) % cap for offset in range(cap)]


def take_any(slots: SlotStore, group: str, cap: int, lease: Lease, now: datetime) -> int | None:
    """The slot this claim now holds, or None when all `cap` of the group's slots are held."""
    for slot in slot_order(cap):
        if slots.take(group, slot, lease, now):
            return slot
    return None


# A deferral for want of a slot waits the stage's slotRetrySeconds times a factor drawn from this
# range, so that the jobs deferred together do not all come back in the same second.
SLOT_RETRY_JITTER = (0.5, 1.5)


def slot_retry_delay(base_seconds: float, draw: float) -> int:
    """The deferral's delay in whole seconds (at least 1): `base_seconds` jittered by `draw` in [0, 1)."""
    low, high = SLOT_RETRY_JITTER
    return max(1, round(base_seconds * (low + (high - low) * draw)))


def effective_cap(configured: int | None, stage_default: int) -> int:
    """The cap a new job is submitted with: the tenant's own (0: none), else the stage's."""
    return configured if configured is not None else stage_default
