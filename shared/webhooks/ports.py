"""Ports of the webhooks: the endpoint store and the webhooks queue.

Adapters: `shared.adapters.dynamodb_webhooks` (the store on DynamoDB) and
`shared.adapters.sqs_webhooks` (the queue and its DLQ on SQS). The HTTP side is
`shared.ports.WebhookPoster`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from shared.errors import ConditionFailedError
from shared.webhooks.endpoints import (
    Attempt,
    Delivery,
    DeliveryMessage,
    Endpoint,
    EndpointSecrets,
    StoredEndpoint,
)


class EndpointExistsError(ConditionFailedError):
    """An endpoint with this id is already stored (ids are random: practically never)."""

    def __init__(self) -> None:
        super().__init__("An endpoint with this id exists.")


class EndpointDirectory(Protocol):
    """The part of the store the notifier reads: endpoints without their secrets."""

    def endpoints_of(self, tenant: str) -> list[Endpoint]:
        """The tenant's endpoints, enabled or not (eventually consistent: a new one shows within a second)."""
        ...


class EndpointStore(EndpointDirectory, Protocol):
    """Endpoints per tenant, their signing secrets, and the attempt records of their deliveries.

    Every change to an endpoint is one conditional write: an id is written once, a rotation
    applies only to the secret it replaces, a state change only to an endpoint that exists.
    """

    def add_endpoint(self, endpoint: Endpoint, secrets: EndpointSecrets) -> None:
        """Store a new endpoint; EndpointExistsError when the id is taken (never overwritten)."""
        ...

    def get_endpoint(self, endpoint_id: str) -> StoredEndpoint | None:
        """The endpoint with its secrets, read strongly consistent, or None."""
        ...

    def all_endpoints(self) -> list[Endpoint]:
        """Every tenant's endpoints (operators only; reads the whole endpoint index)."""
        ...

    def remove_endpoint(self, endpoint_id: str) -> Endpoint | None:
        """Delete the endpoint (its delivery records expire on their own); what was removed, or None."""
        ...

    def rotate_secret(self, endpoint_id: str, replaced: str, rotated: EndpointSecrets) -> bool:
        """Store `rotated` only while the current secret is still `replaced`; False otherwise."""
        ...

    def set_enabled(self, endpoint_id: str, enabled: bool, reason: str | None, at: datetime) -> bool:
        """Enable, or disable with a reason; False when there is no such endpoint."""
        ...

    def record_attempt(self, message: DeliveryMessage, attempt: Attempt, expires_at: datetime) -> None:
        """Append an attempt to the delivery's record (created at its first attempt) and set its state."""
        ...

    def get_delivery(self, message: DeliveryMessage) -> Delivery | None:
        """The record of this message's delivery, read strongly consistent, or None before any attempt."""
        ...

    def deliveries_of(self, endpoint_id: str, limit: int) -> list[Delivery]:
        """The endpoint's most recent deliveries (by event time), newest first, at most `limit`."""
        ...


class DeliveryQueue(Protocol):
    """The webhooks queue and its DLQ."""

    def send_batch(self, messages: list[DeliveryMessage]) -> None:
        """Enqueue messages (in batches of 10); StorageUnavailableError when any was not accepted."""
        ...

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        """Hide a received message for `seconds`: the wait before its next attempt."""
        ...

    def dead_letter(self, body: str, reason: str) -> None:
        """Put a message body on the DLQ, with the reason as a message attribute."""
        ...
