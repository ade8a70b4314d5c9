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
from shared.output_ports import ConnectionClosedError, Follow, TooManyFollowsError
from shared.realtime import Connection, TicketRecord
from shared.realtime_ports import PostOutcome


class InMemoryConnectionStore:
    """ConnectionStore and FollowStore in dictionaries, condition for condition like
    DynamoConnectionStore and DynamoFollowStore (one table: forgetting a connection forgets its follows)."""

    def __init__(self) -> None:
        self.tickets: dict[str, TicketRecord] = {}
        self.connections: dict[str, dict[str, Connection]] = defaultdict(dict)
        # Each connection's list of followed jobs, and the follows by job (the pusher's read).
        self.followed: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.follows: dict[str, dict[str, Follow]] = defaultdict(dict)
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
        """Delete, whether or not it is there, and the follows its list names."""
        self.connections.get(owner.owner_key, {}).pop(connection_id, None)
        for job_id in self.followed.pop((owner.owner_key, connection_id), set()):
            self.follows[job_id].pop(connection_id, None)
        self.writes.append("remove_connection")

    def add_follow(self, follow: Follow, limit: int) -> None:
        """The connection must be recorded and follow fewer than `limit` jobs (or this one)."""
        key = (follow.owner.owner_key, follow.connection_id)
        if follow.connection_id not in self.connections.get(follow.owner.owner_key, {}):
            raise ConnectionClosedError
        listed = self.followed[key]
        if len(listed) >= limit and follow.job_id not in listed:
            raise TooManyFollowsError
        listed.add(follow.job_id)
        self.follows[follow.job_id][follow.connection_id] = follow
        self.writes.append("add_follow")

    def remove_follow(self, owner: Caller, connection_id: str, job_id: str) -> None:
        """The follow, then the list entry; missing ones are fine."""
        self.follows[job_id].pop(connection_id, None)
        self.followed.get((owner.owner_key, connection_id), set()).discard(job_id)
        self.writes.append("remove_follow")

    def followers(self, job_id: str) -> list[Follow]:
        """The job's follows."""
        return list(self.follows.get(job_id, {}).values())

    def forget_follower(self, job_id: str, connection_id: str) -> None:
        """The follow item only (the connection's list goes with the connection)."""
        self.follows[job_id].pop(connection_id, None)
        self.writes.append("forget_follower")


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
