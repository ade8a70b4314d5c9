"""The composition root of the webhook sender."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from functools import cache

import boto3

from functions.webhook_sender.settings import WebhookSenderSettings
from shared.adapters.dynamodb_webhooks import DynamoEndpointStore
from shared.adapters.sqs_webhooks import SqsDeliveryQueue
from shared.adapters.webhook_http import DEFAULT_TIMEOUT_SECONDS, HttpWebhookPoster, resolve_system
from shared.clock import SystemClock
from shared.webhooks.sender import RetryPolicy, WebhookSender


@dataclass(frozen=True)
class SenderDependencies:
    """The sender, wired to the webhooks table, the queue and its DLQ, and the pinned HTTP poster."""

    sender: WebhookSender


@cache
def build_dependencies(settings: WebhookSenderSettings) -> SenderDependencies:
    """Create the clients and the TLS context (the system's trust store) once per container."""
    return SenderDependencies(
        sender=WebhookSender(
            DynamoEndpointStore(boto3.client("dynamodb"), settings.webhooks_table),
            HttpWebhookPoster(ssl.create_default_context(), timeout_seconds=DEFAULT_TIMEOUT_SECONDS),
            SqsDeliveryQueue(boto3.client("sqs"), settings.webhooks_queue_url, settings.webhooks_dlq_url),
            resolve=resolve_system,
            clock=SystemClock(),
            policy=RetryPolicy(scale=settings.retry_scale),
            local_egress=settings.local_egress,
        )
    )
