"""The composition root of the connections function."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import boto3

from functions.ws_connections.settings import ConnectionsSettings
from shared.adapters.dynamodb_connections import DynamoConnectionStore
from shared.adapters.management_api import CLIENT_CONFIG, ManagementApiGateway
from shared.clock import Clock, SystemClock
from shared.realtime_ports import ConnectionGateway, ConnectionStore


@dataclass(frozen=True)
class ConnectionsDependencies:
    """The connection store, the stage's management API and the clock."""

    store: ConnectionStore
    gateway: ConnectionGateway
    clock: Clock


@cache
def build_dependencies(settings: ConnectionsSettings) -> ConnectionsDependencies:
    """Create the clients once per container; the management client at the stage's own endpoint."""
    return ConnectionsDependencies(
        store=DynamoConnectionStore(boto3.client("dynamodb"), settings.connections_table),
        gateway=ManagementApiGateway(
            boto3.client(
                "apigatewaymanagementapi", endpoint_url=settings.connections_endpoint, config=CLIENT_CONFIG
            )
        ),
        clock=SystemClock(),
    )
