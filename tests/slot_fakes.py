"""SlotStore in memory, condition for condition like DynamoSlotStore (tests/integration's contract
test runs the same scenarios against both)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime

from shared.ports import Lease
from shared.slots import SlotLostError


@dataclass
class InMemorySlotStore:
    """Held slots by (group, slot): the token and the expiry, as the table's items."""

    held: dict[tuple[str, int], Lease] = field(default_factory=dict)
    writes: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, group: str, slot: int, lease: Lease, now: datetime) -> bool:
        """attribute_not_exists(pk) OR expiresAt < now."""
        with self._lock:
            self.writes.append("take")
            current = self.held.get((group, slot))
            if current is not None and not current.expires_at < now:
                return False
            self.held[(group, slot)] = lease
            return True

    def extend(self, group: str, slot: int, lease: Lease) -> None:
        """leaseToken = token, else SlotLostError."""
        with self._lock:
            self.writes.append("extend")
            current = self.held.get((group, slot))
            if current is None or current.token != lease.token:
                raise SlotLostError
            self.held[(group, slot)] = lease

    def release(self, group: str, slot: int, token: str) -> bool:
        """leaseToken = token, then delete."""
        with self._lock:
            self.writes.append("release")
            current = self.held.get((group, slot))
            if current is None or current.token != token:
                return False
            del self.held[(group, slot)]
            return True

    def holders(self, group: str, now: datetime) -> int:
        """How many of the group's slots are held (unexpired) at `now`."""
        with self._lock:
            return sum(1 for (g, _), lease in self.held.items() if g == group and lease.expires_at >= now)
