"""Webhook endpoints and their deliveries, as the domain sees them (no storage format here).

An endpoint belongs to one tenant, is registered by an operator, and receives the events it
subscribed to while it is enabled. Its signing secrets are kept apart from the rest of it
(`EndpointSecrets`): the notifier reads endpoints to decide what to enqueue and never needs,
nor gets, a secret; the sender reads them to sign.

A delivery is one event for one endpoint: the message that carries it across retries, and the
record of every attempt (time, status, latency, failure kind; never a body).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from shared.clock import from_iso, to_iso
from shared.webhooks.events import EventType
from shared.webhooks.signing import ROTATION_OVERLAP_SECONDS, signing_secrets

ALL_EVENTS: tuple[EventType, ...] = tuple(EventType)
ROTATION_OVERLAP = timedelta(seconds=ROTATION_OVERLAP_SECONDS)
# Attempt records are kept this long after a delivery's last attempt, then TTL deletes them.
DELIVERY_RETENTION = timedelta(days=30)
_ENDPOINT_ID = re.compile(r"ep_[0-9a-f]{16}")


def new_endpoint_id() -> str:
    """`ep_` + 16 hex digits from the CSPRNG (the store refuses a colliding id)."""
    return "ep_" + secrets.token_hex(8)


def is_endpoint_id(text: str) -> bool:
    """True when `text` has the shape of an endpoint id."""
    return bool(_ENDPOINT_ID.fullmatch(text))


@dataclass(frozen=True)
class Endpoint:
    """A registered receiver: whose it is, where it is, what it hears, whether it is called."""

    endpoint_id: str
    tenant: str
    url: str
    events: tuple[EventType, ...]
    created_at: datetime
    enabled: bool = True
    disabled_reason: str | None = None
    disabled_at: datetime | None = None
    # While a rotation's overlap lasts, the previous secret signs too (until this instant).
    previous_secret_until: datetime | None = None

    def hears(self, event_type: EventType) -> bool:
        """True when the endpoint is enabled and subscribed to `event_type`."""
        return self.enabled and event_type in self.events


@dataclass(frozen=True)
class EndpointSecrets:
    """The signing secrets: the current one, and the previous one during a rotation's overlap."""

    current: str
    previous: str | None = None
    previous_until: datetime | None = None

    def signing(self, now: datetime) -> list[str]:
        """The secrets that sign at `now` (both during the overlap, the current one first)."""
        until = int(self.previous_until.timestamp()) if self.previous_until is not None else None
        return signing_secrets(self.current, self.previous, until, int(now.timestamp()))

    def rotated(self, new_secret: str, now: datetime) -> EndpointSecrets:
        """After a rotation at `now`: the new secret is current, the old one signs for 24 h more."""
        return EndpointSecrets(
            current=new_secret, previous=self.current, previous_until=now + ROTATION_OVERLAP
        )


@dataclass(frozen=True)
class StoredEndpoint:
    """An endpoint with its secrets, as the sender and the rotation read it."""

    endpoint: Endpoint
    secrets: EndpointSecrets


class DeliveryState(StrEnum):
    """Where a delivery stands after its latest attempt."""

    RETRYING = "retrying"  # an attempt failed; the message comes back on the retry schedule
    DELIVERED = "delivered"  # a 2xx answer
    GONE = "gone"  # a 410 answer: the endpoint was disabled
    DEAD = "dead"  # out of attempts: the message is on the webhooks DLQ


@dataclass(frozen=True)
class Attempt:
    """One POST (or one refused by the egress guard): never the body, sent or received."""

    number: int  # the message's receive count: 1 for the first attempt of a (re)driven message
    at: datetime
    status: int | None  # the HTTP status, None when no answer came
    latency_ms: int | None  # None when nothing was sent (guard refusal)
    failure: str | None  # timeout, connection, tls, protocol, egress:<refusal>; None with a status
    outcome: DeliveryState


@dataclass(frozen=True)
class Delivery:
    """One event for one endpoint, and every attempt made at it (oldest first)."""

    endpoint_id: str
    webhook_id: str
    event_type: EventType
    job_id: str
    event_time: datetime
    state: DeliveryState
    attempts: tuple[Attempt, ...] = field(default=())

    @property
    def last_attempt(self) -> Attempt | None:
        """The newest attempt, or None."""
        return self.attempts[-1] if self.attempts else None


class UnreadableDeliveryError(ValueError):
    """A webhooks queue message that is not a delivery this code can read (poison)."""


@dataclass(frozen=True)
class DeliveryMessage:
    """What the webhooks queue carries for one (event, endpoint): the body to sign, as it is signed.

    The body is built once, by the notifier, from the stream record; every attempt (and a
    redrive from the DLQ) signs and sends the same bytes, with a fresh timestamp.
    """

    endpoint_id: str
    tenant: str
    webhook_id: str
    event_type: EventType
    job_id: str
    event_time: datetime
    body: str

    def encode(self) -> str:
        """The SQS message body."""
        return json.dumps(
            {
                "endpointId": self.endpoint_id,
                "tenant": self.tenant,
                "webhookId": self.webhook_id,
                "type": self.event_type.value,
                "jobId": self.job_id,
                "eventTime": to_iso(self.event_time),
                "body": self.body,
            },
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, text: str) -> DeliveryMessage:
        """Read an SQS message body; UnreadableDeliveryError when it is not one of ours."""
        try:
            raw: Any = json.loads(text)
            message = cls(
                endpoint_id=_text(raw, "endpointId"),
                tenant=_text(raw, "tenant"),
                webhook_id=_text(raw, "webhookId"),
                event_type=EventType(_text(raw, "type")),
                job_id=_text(raw, "jobId"),
                event_time=from_iso(_text(raw, "eventTime")),
                body=_text(raw, "body"),
            )
        except (KeyError, ValueError, TypeError, AttributeError, RecursionError) as error:
            raise UnreadableDeliveryError("not a webhook delivery message") from error
        if not is_endpoint_id(message.endpoint_id):
            raise UnreadableDeliveryError("not a webhook delivery message")
        return message


def _text(raw: Any, name: str) -> str:
    value = raw[name]
    if not isinstance(value, str) or not value:
        raise TypeError(name)
    return value


def parse_events(names: Sequence[str]) -> tuple[EventType, ...]:
    """The subscribed events in their canonical order; every event when none is named."""
    if not names:
        return ALL_EVENTS
    chosen = {EventType(name) for name in names}
    return tuple(event for event in ALL_EVENTS if event in chosen)
