"""Live updates: tickets, connections and the updates pushed to them (DESIGN.md, "Live updates").

Pure domain code: no AWS client here. The stores and the WebSocket management API are ports
(`shared.realtime_ports`), so every rule below is tested with fakes.

- A ticket is a single-use, 60-second credential for one WebSocket connect, so that no ID token
  travels in a URL. The caller gets it once; the store keeps only its SHA-256.
- A connection belongs to an owner (tenant + sub) and lives at most 2 hours (API Gateway's limit);
  an owner holds at most 10: the oldest is closed when an eleventh opens.
- An update is a job's status document, pushed to the job owner's connections only. In one
  batch of stream records the highest revision of each job wins, so a connection never gets an
  older revision after a newer one from the same batch.
"""

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.contract import ResponseModel, StatusDocument, Timestamp
from shared.job import Caller

TICKET_BYTES = 32
TICKET_TTL = timedelta(seconds=60)
CONNECTION_TTL = timedelta(hours=2)
# $connect records a connection before API Gateway completes the handshake, and until it does, a
# post to that connection answers 410 like a closed one. The $connect integration may run for up
# to 29 s, so a 410 from a connection younger than this may come from one still opening: it is
# kept (a dead one answers 410 again later and is forgotten then; TTL ends it anyway).
CONNECT_GRACE = timedelta(seconds=30)
MAX_CONNECTIONS_PER_OWNER = 10
TICKET_QUERY_PARAMETER = "ticket"
# 32 random bytes in unpadded base64url: exactly 43 characters of that alphabet.
_TICKET_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")
# Writes the notifier never pushes: a lease extension or a sweep time moved changes nothing a
# client sees (the stream filter drops them; the service checks again for replays).
SILENT_WRITES = frozenset({"heartbeat", "defer"})


# --- tickets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TicketRecord:
    """What the store keeps of a ticket: its hash, whose it is, and until when it is good."""

    ticket_hash: str
    owner: Caller
    expires_at: datetime


class TicketDocument(ResponseModel):
    """The 201 body of POST /v1/realtime/tickets: a single-use ticket and the URL that carries it."""

    ticket: str
    url: str
    expires_at: Timestamp


def ticket_hash(ticket: str) -> str:
    """The stored form of a ticket: SHA-256, hex. The ticket itself is never stored or logged."""
    return hashlib.sha256(ticket.encode("ascii")).hexdigest()


def new_ticket(random_bytes: Callable[[int], bytes]) -> str:
    """A ticket: TICKET_BYTES random bytes, base64url without padding."""
    raw = random_bytes(TICKET_BYTES)
    if len(raw) < TICKET_BYTES:
        raise ValueError("a ticket needs 32 random bytes")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def is_ticket_shaped(text: str | None) -> bool:
    """True when `text` could be a ticket we issued (so a made-up string costs no storage call)."""
    if not text or not _TICKET_SHAPE.fullmatch(text):
        return False
    try:
        base64.urlsafe_b64decode(text + "=")
    except (binascii.Error, ValueError):
        return False
    return True


def grant_ticket(
    caller: Caller, now: datetime, websocket_url: str, random_bytes: Callable[[int], bytes]
) -> tuple[TicketDocument, TicketRecord]:
    """A new ticket for `caller`: what the caller gets, and what the store keeps (the hash only)."""
    ticket = new_ticket(random_bytes)
    expires_at = now + TICKET_TTL
    separator = "&" if "?" in websocket_url else "?"
    grant = TicketDocument(
        ticket=ticket,
        url=f"{websocket_url}{separator}{TICKET_QUERY_PARAMETER}={ticket}",
        expires_at=expires_at,
    )
    return grant, TicketRecord(ticket_hash=ticket_hash(ticket), owner=caller, expires_at=expires_at)


# --- connections -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Connection:
    """One open WebSocket connection of an owner."""

    connection_id: str
    owner: Caller
    connected_at: datetime

    @property
    def expires_at(self) -> datetime:
        """When the store forgets it (API Gateway ends every connection after 2 hours)."""
        return self.connected_at + CONNECTION_TTL


def forget_when_gone(connection: Connection, now: datetime) -> bool:
    """True when a 410 means the connection is gone, not still opening (see CONNECT_GRACE)."""
    return now - connection.connected_at >= CONNECT_GRACE


def connections_to_close(
    connections: Iterable[Connection], keep: int = MAX_CONNECTIONS_PER_OWNER
) -> list[Connection]:
    """Beyond the `keep` newest (by connectedAt, then id), the ones to close: the oldest first."""
    ordered = sorted(connections, key=lambda c: (c.connected_at, c.connection_id), reverse=True)
    return sorted(ordered[keep:], key=lambda c: (c.connected_at, c.connection_id))


def owner_from_context(context: dict[str, Any] | None) -> Caller | None:
    """The owner the ticket authorizer put in the connection's context, or None."""
    tenant = (context or {}).get("tenant")
    sub = (context or {}).get("sub")
    if not isinstance(tenant, str) or not isinstance(sub, str) or not tenant or not sub:
        return None
    return Caller(tenant=tenant, sub=sub)


def authorizer_context(owner: Caller) -> dict[str, str]:
    """What the authorizer hands API Gateway for the connection's later routes."""
    return {"tenant": owner.tenant, "sub": owner.sub}


@dataclass(frozen=True)
class RouteEvent:
    """What the route functions read of an API Gateway WebSocket event (never the query string)."""

    route_key: str
    connection_id: str
    connected_at: datetime
    owner: Caller | None
    body: str | None = None  # a message's text (routes other than $connect and $disconnect)

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> "RouteEvent":
        """Parse the request context; the owner comes from the ticket authorizer's context."""
        context = event.get("requestContext") or {}
        connected_ms = context.get("connectedAt")
        connected_at = (
            datetime.fromtimestamp(int(connected_ms) / 1000, tz=UTC)
            if isinstance(connected_ms, int | float | str) and str(connected_ms).isdigit()
            else datetime.now(UTC)
        )
        return cls(
            route_key=str(context.get("routeKey", "")),
            connection_id=str(context.get("connectionId", "")),
            connected_at=connected_at,
            owner=owner_from_context(context.get("authorizer")),
            body=event.get("body") if isinstance(event.get("body"), str) else None,
        )


# --- updates ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobChange:
    """One job write as the stream reported it (its new image, nothing read from the table)."""

    sequence_number: str
    owner: Caller
    job_id: str
    revision: int
    write_kind: str
    document: StatusDocument
    # Part of a webhook's id (`{jobId}.{redriveCount}.{type}`): a redriven job ends anew.
    redrive_count: int = 0

    @property
    def pushed(self) -> bool:
        """False for writes a client cannot see (a heartbeat, a sweep time moved)."""
        return self.write_kind not in SILENT_WRITES


def job_message(document: StatusDocument) -> str:
    """The frame a connection receives: `{"type": "job", "job": <status document>}`."""
    return json.dumps({"type": "job", "job": document.to_wire()}, separators=(",", ":"))


def newest_revisions(changes: Sequence[JobChange]) -> dict[str, int]:
    """The highest revision of each job in a batch: only that one is pushed."""
    newest: dict[str, int] = {}
    for change in changes:
        newest[change.job_id] = max(change.revision, newest.get(change.job_id, change.revision))
    return newest


class BatchPlan:
    """Which changes of one batch to push: each job's newest, once; older ones and repeats dropped."""

    def __init__(self, changes: Sequence[JobChange]) -> None:
        self._newest = newest_revisions([c for c in changes if c.pushed])
        self._pushed: set[str] = set()

    def should_push(self, change: JobChange) -> bool:
        """True once per job, for its newest revision in the batch."""
        if not change.pushed or change.revision < self._newest.get(change.job_id, change.revision):
            return False
        if change.job_id in self._pushed:
            return False  # the same revision twice (a replayed record)
        self._pushed.add(change.job_id)
        return True


# --- the WebSocket routes --------------------------------------------------------------------

PONG = {"type": "pong"}


def answer_message(body: str | None) -> dict[str, Any]:
    """The `$default` route's reply: a pong to `{"action": "ping"}`, an error for anything else."""
    try:
        message = json.loads(body or "")
    except (ValueError, RecursionError):
        return {"type": "error", "code": "invalid_message", "message": 'Send JSON: {"action": "ping"}.'}
    if isinstance(message, dict) and message.get("action") == "ping":
        return PONG
    return {
        "type": "error",
        "code": "unknown_action",
        "message": "The actions are ping, follow and unfollow.",
    }
