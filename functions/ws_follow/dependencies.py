"""The composition root of the follow function."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import boto3

from functions.ws_follow.settings import FollowSettings
from shared.adapters.dynamodb_connections import DynamoFollowStore
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.dynamodb_output import DynamoOutputEventStore
from shared.adapters.management_api import CLIENT_CONFIG, ManagementApiGateway
from shared.clock import Clock, SystemClock
from shared.output_ports import FollowStore, OutputEventStore
from shared.ports import JobRepository
from shared.realtime_ports import ConnectionGateway


@dataclass(frozen=True)
class FollowDependencies:
    """The jobs (read only, for the owner check), the follows, the events, the stage's management
    API (the replay is posted to the connection) and the clock."""

    jobs: JobRepository
    follows: FollowStore
    events: OutputEventStore
    gateway: ConnectionGateway
    clock: Clock


@cache
def build_dependencies(settings: FollowSettings) -> FollowDependencies:
    """Create the clients once per container; the management client at the stage's own endpoint."""
    dynamodb = boto3.client("dynamodb")
    return FollowDependencies(
        jobs=DynamoJobRepository(dynamodb, settings.jobs_table, idempotency_table=""),
        follows=DynamoFollowStore(dynamodb, settings.connections_table),
        events=DynamoOutputEventStore(dynamodb, settings.output_events_table),
        gateway=ManagementApiGateway(
            boto3.client(
                "apigatewaymanagementapi", endpoint_url=settings.connections_endpoint, config=CLIENT_CONFIG
            )
        ),
        clock=SystemClock(),
    )
