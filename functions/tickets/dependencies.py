"""The composition root of the tickets function."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import boto3

from functions.tickets.settings import TicketsSettings
from shared.adapters.dynamodb_connections import DynamoConnectionStore
from shared.clock import Clock, SystemClock
from shared.realtime_ports import ConnectionStore


@dataclass(frozen=True)
class TicketsDependencies:
    """The ticket store, the clock and the source of the tickets' randomness."""

    settings: TicketsSettings
    store: ConnectionStore
    clock: Clock
    random_bytes: Callable[[int], bytes]


@cache
def build_dependencies(settings: TicketsSettings) -> TicketsDependencies:
    """Create the DynamoDB client once per container."""
    return TicketsDependencies(
        settings=settings,
        store=DynamoConnectionStore(boto3.client("dynamodb"), settings.connections_table),
        clock=SystemClock(),
        random_bytes=secrets.token_bytes,
    )
