"""In-memory fakes of the live-update ports (shared.realtime_ports), with the adapters' semantics.

`InMemoryConnectionStore` keeps the conditions of shared/adapters/dynamodb_connections.py (a
ticket is taken once, only before it expires; connections live in their owner's partition), and
tests/integration/test_connection_store_contract.py runs the same checks on both. `FakeGateway`
behaves like the management API: a post to an open connection is received, one to anything else
is GONE, and closing a connection ends it. Faults are injected by subclassing, not by flags.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from shared.job import Caller
from shared.realtime import Connection, TicketRecord
from shared.realtime_ports import PostOutcome


class InMemoryConnectionStore:
    """ConnectionStore in dictionaries, condition for condition like DynamoConnectionStore."""

    def __init__(self) -> None:
        self.tickets: dict[str, TicketRecord] = {}
        self.connections: dict[str, dict[str, Connection]] = defaultdict(dict)
        self.writes: list[str] = []

    def put_ticket(self, ticket: TicketRecord) -> None:
        """`attribute_not_exists(pk)`: a hash is stored once."""
        if ticket.ticket_hash in self.tickets:
            raise AssertionError("ticket hash collision")
        self.tickets[ticket.ticket_hash] = ticket
        self.writes.append("put_ticket")

    def take_ticket(self, ticket_hash: str, now: datetime) -> Caller | None:
        """`attribute_exists(pk) AND expiresAt > :now`, then delete: one winner, before expiry only."""
        ticket = self.tickets.get(ticket_hash)
        if ticket is None or not ticket.expires_at > now:
            return None
        del self.tickets[ticket_hash]
        self.writes.append("take_ticket")
        return ticket.owner

    def add_connection(self, connection: Connection) -> None:
        """Put (or rewrite) the connection under its owner."""
        self.connections[connection.owner.owner_key][connection.connection_id] = connection
        self.writes.append("add_connection")

    def connections_of(self, owner: Caller) -> list[Connection]:
        """The owner's partition, and nobody else's."""
        return list(self.connections.get(owner.owner_key, {}).values())

    def remove_connection(self, owner: Caller, connection_id: str) -> None:
        """Delete, whether or not it is there."""
        self.connections.get(owner.owner_key, {}).pop(connection_id, None)
        self.writes.append("remove_connection")


class FakeGateway:
    """The @connections API over a set of open connections; what each received, in order."""

    def __init__(self, *open_ids: str) -> None:
        self.open: set[str] = set(open_ids)
        self.received: dict[str, list[str]] = defaultdict(list)
        self.closed: list[str] = []

    def connect(self, connection_id: str) -> None:
        """A client opened this connection."""
        self.open.add(connection_id)

    def post(self, connection_id: str, data: str) -> PostOutcome:
        """Delivered to an open connection; GONE otherwise."""
        if connection_id not in self.open:
            return PostOutcome.GONE
        self.received[connection_id].append(data)
        return PostOutcome.SENT

    def close(self, connection_id: str) -> None:
        """DeleteConnection: the connection ends (closing a gone one is fine)."""
        if connection_id in self.open:
            self.open.discard(connection_id)
            self.closed.append(connection_id)
