"""Plain-text building blocks of the operator commands' output: instants and ages (tables: the
console's one printer, outlast.cli.console)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def instant(value: datetime | None) -> str:
    """An instant in UTC to the second, or `-`."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if value is not None else "-"


def duration(span: timedelta) -> str:
    """A short human duration: `45s`, `12m05s`, `3h07m`, `2d04h`."""
    seconds = max(0, int(span.total_seconds()))
    minutes, secs = divmod(seconds, 60)
    hours, mins = divmod(minutes, 60)
    days, hrs = divmod(hours, 24)
    if days:
        return f"{days}d{hrs:02d}h"
    if hours:
        return f"{hours}h{mins:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def relative(value: datetime | None, now: datetime) -> str:
    """`in 12s` or `3m05s ago` (or `-`)."""
    if value is None:
        return "-"
    if value > now:
        return f"in {duration(value - now)}"
    return f"{duration(now - value)} ago"
