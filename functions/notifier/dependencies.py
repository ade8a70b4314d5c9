"""The composition root of the notifier."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import boto3

from functions.notifier.settings import NotifierSettings
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.adapters.dynamodb_connections import DynamoConnectionStore
from shared.adapters.dynamodb_documents import DynamoDocumentRepository
from shared.adapters.dynamodb_webhooks import DynamoEndpointStore
from shared.adapters.job_stream import job_change
from shared.adapters.management_api import CLIENT_CONFIG, ManagementApiGateway
from shared.adapters.sqs_webhooks import SqsDeliveryQueue
from shared.budget_ports import BudgetLedger
from shared.clock import Clock, SystemClock
from shared.documents.ports import DocumentRepository
from shared.realtime import JobChange
from shared.realtime_ports import ConnectionGateway, ConnectionStore
from shared.webhooks.deliveries import DeliveryEnqueuer


@dataclass(frozen=True)
class NotifierDependencies:
    """The connection store, the stage's management API, the stream record reader, webhooks, budgets
    and the clock (a 410 forgets only a connection past its handshake)."""

    store: ConnectionStore
    gateway: ConnectionGateway
    # A stream record as a job change (None: not a job write); raises ValueError when unreadable.
    read_change: Callable[[Mapping[str, Any]], JobChange | None]
    # Terminal writes -> one message per subscribed endpoint on the webhooks queue.
    webhooks: DeliveryEnqueuer
    # Token budgets: terminal writes settle their run's reservation (functions.notifier.settlement).
    budgets: BudgetLedger
    clock: Clock
    # Jobs on documents: terminal writes unpin their document (functions.notifier.settlement).
    documents: DocumentRepository


@cache
def build_dependencies(settings: NotifierSettings) -> NotifierDependencies:
    """Create the clients once per container; the management client at the stage's callback URL."""
    dynamodb = boto3.client("dynamodb")
    return NotifierDependencies(
        store=DynamoConnectionStore(dynamodb, settings.connections_table),
        gateway=ManagementApiGateway(
            boto3.client(
                "apigatewaymanagementapi", endpoint_url=settings.connections_endpoint, config=CLIENT_CONFIG
            )
        ),
        read_change=job_change,
        webhooks=DeliveryEnqueuer(
            DynamoEndpointStore(dynamodb, settings.webhooks_table),
            SqsDeliveryQueue(boto3.client("sqs"), settings.webhooks_queue_url),
        ),
        budgets=DynamoBudgetLedger(dynamodb, settings.budgets_table),
        clock=SystemClock(),
        documents=DynamoDocumentRepository(dynamodb, settings.documents_table),
    )
