"""The composition root of the output pusher."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import boto3

from functions.output_pusher.settings import OutputPusherSettings
from shared.adapters.dynamodb_connections import DynamoFollowStore
from shared.adapters.management_api import CLIENT_CONFIG, ManagementApiGateway
from shared.clock import Clock, SystemClock
from shared.output_ports import FollowStore
from shared.realtime_ports import ConnectionGateway


@dataclass(frozen=True)
class OutputPusherDependencies:
    """The follows, the stage's management API and the clock (a 410 forgets only a follow whose
    connection is past its handshake)."""

    follows: FollowStore
    gateway: ConnectionGateway
    clock: Clock


@cache
def build_dependencies(settings: OutputPusherSettings) -> OutputPusherDependencies:
    """Create the clients once per container; the management client at the stage's callback URL."""
    return OutputPusherDependencies(
        follows=DynamoFollowStore(boto3.client("dynamodb"), settings.connections_table),
        gateway=ManagementApiGateway(
            boto3.client(
                "apigatewaymanagementapi", endpoint_url=settings.connections_endpoint, config=CLIENT_CONFIG
            )
        ),
        clock=SystemClock(),
    )
