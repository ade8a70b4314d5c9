"""An in-memory fake of the output events store (shared.output_ports.OutputEventStore).

It keeps the adapter's semantics (shared/adapters/dynamodb_output.py): an event is written once
(a second put of the same attempt and seq changes nothing), reads are in (attempt, seq) order
after a cursor, and an event past its expiry is gone. tests/integration/test_output_store_contract.py
runs the same checks on both. Faults are injected by subclassing.
"""

from __future__ import annotations

from datetime import datetime

from shared.output import OutputCursor, OutputEvent


class InMemoryOutputEventStore:
    """Events by (job, attempt, seq), with their expiry."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, int, int], OutputEvent] = {}
        self.expires_at: dict[tuple[str, int, int], datetime] = {}
        self.writes: list[OutputEvent] = []  # every write that stored an event, in order

    def put_event(self, event: OutputEvent, expires_at: datetime) -> None:
        """`attribute_not_exists(pk)`: a repeated put leaves the first one."""
        key = (event.job_id, event.attempt, event.seq)
        if key in self.events:
            return
        self.events[key] = event
        self.expires_at[key] = expires_at
        self.writes.append(event)

    def events_after(self, job_id: str, after: OutputCursor, limit: int, now: datetime) -> list[OutputEvent]:
        """Live events of the job after the cursor, in order, at most `limit`."""
        found = sorted(
            (
                event
                for key, event in self.events.items()
                if key[0] == job_id and event.position > after and self.expires_at[key] > now
            ),
            key=lambda event: event.position,
        )
        return found[:limit]

    def of(self, job_id: str, attempt: int) -> list[OutputEvent]:
        """One attempt's events in order (for assertions)."""
        return sorted(
            (e for (job, a, _), e in self.events.items() if job == job_id and a == attempt),
            key=lambda event: event.seq,
        )
