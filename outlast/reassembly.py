"""A streaming job's text, put back together from its output events (DESIGN.md, "Streaming output").

Events come from a replay, from live pushes and from GET /v1/jobs/{id}/output, in any order and
possibly twice: replayed and live events interleave, and stream records of one job are not
ordered across items. Per attempt, this keeps the contiguous prefix (seq 1, 2, ... without a gap)
and buffers what arrives past a gap until the gap fills; a repeat changes nothing. The text shown
is the highest attempt's (a newer attempt replaces an older one's text), or, once the job has
ended, its result's attempt. Pure: no I/O, no clock; the command line and tests drive it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Attempt:
    pieces: list[str] = field(default_factory=list)  # seq 1..len(pieces), contiguous
    waiting: dict[int, str] = field(default_factory=dict)  # seq past a gap

    @property
    def last_seq(self) -> int:
        return len(self.pieces)

    def add(self, seq: int, text: str) -> bool:
        if seq <= self.last_seq or seq in self.waiting or seq < 1:
            return False  # a repeat (or nonsense): nothing changes
        self.waiting[seq] = text
        grew = False
        while self.last_seq + 1 in self.waiting:
            self.pieces.append(self.waiting.pop(self.last_seq + 1))
            grew = True
        return grew


class Reassembly:
    """One job's attempts, and which one to show."""

    def __init__(self) -> None:
        self._attempts: dict[int, _Attempt] = {}
        self._result_attempt: int | None = None

    def add(self, attempt: int, seq: int, text: str) -> bool:
        """Take one event; True when the text shown changed (it grew, or another attempt is shown)."""
        shown = self.shown_attempt
        grew = self._attempts.setdefault(attempt, _Attempt()).add(seq, text)
        return self.shown_attempt != shown or (grew and attempt == self.shown_attempt)

    def seen(self, attempt: int, seq: int) -> bool:
        """True when this event was taken already (contiguous or waiting past a gap)."""
        found = self._attempts.get(attempt)
        return found is not None and (seq <= found.last_seq or seq in found.waiting)

    def settle(self, result_attempt: int | None) -> None:
        """The job ended: show its result's attempt from now on (None: no result, keep the highest)."""
        self._result_attempt = result_attempt

    @property
    def shown_attempt(self) -> int | None:
        """The attempt whose text is shown: the result's once known, else the highest seen."""
        if self._result_attempt is not None:
            return self._result_attempt
        return max(self._attempts, default=None)

    def text(self, attempt: int | None = None) -> str:
        """The contiguous text of `attempt` (default: the one shown)."""
        chosen = self.shown_attempt if attempt is None else attempt
        found = self._attempts.get(chosen) if chosen is not None else None
        return "".join(found.pieces) if found else ""

    def last_seq(self, attempt: int) -> int:
        """How far `attempt` is contiguous (0: none of it yet)."""
        found = self._attempts.get(attempt)
        return found.last_seq if found else 0

    def has_gap(self, attempt: int) -> bool:
        """True while events of `attempt` wait past a gap."""
        found = self._attempts.get(attempt)
        return bool(found and found.waiting)

    def cursor(self) -> tuple[int, int]:
        """Where to resume reading (`after`): the shown attempt's last contiguous event, so the
        events still missing of it, and every later attempt, come next. (0, 0) before any event."""
        attempt = self.shown_attempt
        if attempt is None:
            return (0, 0)
        return (attempt, self.last_seq(attempt))
