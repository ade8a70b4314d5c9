"""The composition root of the ticket authorizer."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import boto3

from functions.ws_authorizer.settings import AuthorizerSettings
from shared.adapters.dynamodb_connections import DynamoConnectionStore
from shared.clock import Clock, SystemClock
from shared.realtime_ports import ConnectionStore


@dataclass(frozen=True)
class AuthorizerDependencies:
    """The ticket store and the clock."""

    store: ConnectionStore
    clock: Clock


@cache
def build_dependencies(settings: AuthorizerSettings) -> AuthorizerDependencies:
    """Create the DynamoDB client once per container."""
    return AuthorizerDependencies(
        store=DynamoConnectionStore(boto3.client("dynamodb"), settings.connections_table),
        clock=SystemClock(),
    )
