"""SQS fair queues, emulated: which buffered messages a local poller hands out first.

An emulation of AWS's documented behaviour ("How Amazon SQS fair queues work", SQS Developer
Guide), not a copy of its implementation. moto returns a standard queue's messages in send
order, so without this a tenant's backlog would hide every other tenant's message behind it.
The rules, as AWS documents them:
- a message's tenant is its `MessageGroupId`; a message without one is a tenant of its own;
- a tenant is noisy when it holds more than 10% of the queue's in-flight messages with at
  least 30 of its own in flight (concurrency share), or more than 10% of the consumers' recent
  processing time (processing-time share);
- messages of quiet tenants are delivered first whenever any wait; among noisy tenants, the
  one with the fewest messages in flight goes first; a noisy tenant's messages are never
  dropped, only delivered after;
- nothing changes for consumers.
What AWS measures approximately (a distributed system) is measured exactly here, over the
poller's own deliveries: the processing-time share is the last RECENT_SECONDS of invocations.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

NOISY_SHARE = 0.10
NOISY_MIN_IN_FLIGHT = 30
RECENT_SECONDS = 60.0

T = TypeVar("T")


@dataclass(frozen=True)
class _Spent:
    ended: float
    group: str
    seconds: float


class FairScheduler:
    """In-flight counts and recent processing time per group; orders what waits by AWS's rules.

    Thread-safe: a mapping's pollers share one scheduler, as Lambda's pollers share one queue.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = defaultdict(int)
        self._spent: deque[_Spent] = deque()

    def _recent(self) -> dict[str, float]:
        horizon = self._clock() - RECENT_SECONDS
        while self._spent and self._spent[0].ended < horizon:
            self._spent.popleft()
        by_group: dict[str, float] = defaultdict(float)
        for spent in self._spent:
            by_group[spent.group] += spent.seconds
        return by_group

    def _noisy(self, group: str, recent: dict[str, float]) -> bool:
        total_in_flight = sum(self._in_flight.values())
        own = self._in_flight.get(group, 0)
        if own >= NOISY_MIN_IN_FLIGHT and own > NOISY_SHARE * total_in_flight:
            return True
        total_time = sum(recent.values())
        return total_time > 0 and recent.get(group, 0.0) > NOISY_SHARE * total_time

    def take(self, waiting: Sequence[T], group_of: Callable[[T], str | None], count: int) -> list[T]:
        """Up to `count` of `waiting` (oldest first within a rank) to deliver now, marked in flight.

        A message without a group is its own tenant, so never noisy; quiet tenants' messages go
        first, then noisy tenants' by fewest in flight (recounted as each one is taken).
        """
        with self._lock:
            recent = self._recent()
            quiet: list[T] = []
            noisy: dict[str, deque[T]] = defaultdict(deque)
            for item in waiting:
                group = group_of(item)
                if group is None or not self._noisy(group, recent):
                    quiet.append(item)
                else:
                    noisy[group].append(item)
            taken = quiet[:count]
            for item in taken:
                if (group := group_of(item)) is not None:
                    self._in_flight[group] += 1
            while len(taken) < count and noisy:
                group = min(noisy, key=lambda g: self._in_flight.get(g, 0))
                taken.append(noisy[group].popleft())
                self._in_flight[group] += 1
                if not noisy[group]:
                    del noisy[group]
            return taken

    def finished(self, groups: Sequence[str | None], seconds: float) -> None:
        """The messages of these groups were processed (or given up) in one invocation of `seconds`."""
        with self._lock:
            now = self._clock()
            for group in groups:
                if group is None:
                    continue
                self._in_flight[group] = max(0, self._in_flight[group] - 1)
                if not self._in_flight[group]:
                    del self._in_flight[group]
                self._spent.append(_Spent(ended=now, group=group, seconds=seconds))

    def in_flight(self) -> dict[str, int]:
        """A copy of the in-flight counts by group (for tests and logs)."""
        with self._lock:
            return dict(self._in_flight)
