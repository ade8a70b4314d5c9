"""Ports of the live updates: the ticket and connection store, and the WebSocket management API.

Adapters: `shared.adapters.dynamodb_connections` (the store on DynamoDB) and
`shared.adapters.management_api` (API Gateway's `@connections` API through boto3).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Protocol

from shared.job import Caller
from shared.realtime import Connection, TicketRecord


class ConnectionStore(Protocol):
    """Tickets (by hash) and open connections (by owner), with TTL on both.

    Each method is one DynamoDB request; taking a ticket is one conditional delete, so a
    ticket connects at most once however many connects race for it.
    """

    def put_ticket(self, ticket: TicketRecord) -> None:
        """Store a new ticket (its hash, owner and expiry)."""
        ...

    def take_ticket(self, ticket_hash: str, now: datetime) -> Caller | None:
        """Delete the ticket if it exists and has not expired; its owner, or None (used, expired, unknown)."""
        ...

    def add_connection(self, connection: Connection) -> None:
        """Record an open connection under its owner."""
        ...

    def connections_of(self, owner: Caller) -> list[Connection]:
        """The owner's recorded connections (strongly consistent; at most a few dozen)."""
        ...

    def remove_connection(self, owner: Caller, connection_id: str) -> None:
        """Forget a connection (closed, gone or disconnected); removing a missing one is fine."""
        ...


class PostOutcome(StrEnum):
    """What became of one message sent to a connection."""

    SENT = "sent"
    GONE = "gone"  # 410 GoneException: the connection no longer exists
    FAILED = "failed"  # anything else (throttled, a 5xx, a timeout): the message is lost


class ConnectionGateway(Protocol):
    """API Gateway's management API for this WebSocket stage (`@connections`)."""

    def post(self, connection_id: str, data: str) -> PostOutcome:
        """Send one text frame to a connection; never raises for a failed send."""
        ...

    def close(self, connection_id: str) -> None:
        """Close a connection (DeleteConnection); closing one that is already gone is fine."""
        ...
