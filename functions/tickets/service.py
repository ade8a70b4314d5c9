"""The ticket use case: a fresh single-use ticket for the caller, stored as its hash."""

from __future__ import annotations

from functions.tickets.dependencies import TicketsDependencies
from shared.clock import truncate_to_millis
from shared.job import Caller
from shared.observability import logger
from shared.realtime import TicketDocument, grant_ticket


def issue_ticket(deps: TicketsDependencies, caller: Caller) -> TicketDocument:
    """Store the ticket's hash with its owner and a 60 s expiry; hand the ticket out once."""
    now = truncate_to_millis(deps.clock.now())
    grant, record = grant_ticket(caller, now, deps.settings.websocket_url, deps.random_bytes)
    deps.store.put_ticket(record)
    logger.info("ticket issued")  # neither the ticket nor its hash: the hash would find the item
    return grant
