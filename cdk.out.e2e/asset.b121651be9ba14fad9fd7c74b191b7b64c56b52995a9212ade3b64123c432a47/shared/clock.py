"""Time as the domain sees it: an injectable clock and one wire format for instants."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """Tells the current instant; tests pass a fake to move time without sleeping."""

    def now(self) -> datetime:
        """Return the current instant, timezone-aware UTC."""
        ...


class SystemClock:
    """The wall clock."""

    def now(self) -> datetime:
        """Return the current instant, timezone-aware UTC."""
        return datetime.now(UTC)


def to_iso(instant: datetime) -> str:
    """Format an instant as RFC 3339 UTC with milliseconds: fixed width, so strings sort as time does."""
    utc = instant.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def from_iso(text: str) -> datetime:
    """Parse what `to_iso` wrote."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def truncate_to_millis(instant: datetime) -> datetime:
    """Drop sub-millisecond precision, so an instant survives a round trip through `to_iso`."""
    return instant.replace(microsecond=instant.microsecond // 1000 * 1000)


def epoch_seconds(instant: datetime) -> int:
    """Whole seconds since the epoch, the unit DynamoDB TTL reads."""
    return int(instant.timestamp())
