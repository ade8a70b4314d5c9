"""In-memory fakes of the webhook ports: the endpoint store, the queue and the poster.

The store keeps to the same rules as the DynamoDB adapter (tests/integration/
test_webhook_store_contract.py runs one contract against both): an endpoint id is written once,
a rotation applies only to the secret it replaces, a state change only to an endpoint that
exists, and the directory read never carries a secret.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from datetime import datetime

from shared.errors import StorageUnavailableError
from shared.ports import PostResult, TransportFailure
from shared.webhooks.egress import Destination
from shared.webhooks.endpoints import (
    Attempt,
    Delivery,
    DeliveryMessage,
    Endpoint,
    EndpointSecrets,
    StoredEndpoint,
)
from shared.webhooks.ports import EndpointExistsError


class InMemoryEndpointStore:
    """EndpointStore in dictionaries, behind one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._endpoints: dict[str, StoredEndpoint] = {}
        self._deliveries: dict[tuple[str, datetime, str], Delivery] = {}
        self.reads_of_directory = 0
        self.unavailable = False  # every call raises StorageUnavailableError while set

    def _check(self) -> None:
        if self.unavailable:
            raise StorageUnavailableError("the fake store is down")

    def add_endpoint(self, endpoint: Endpoint, secrets: EndpointSecrets) -> None:
        with self._lock:
            self._check()
            if endpoint.endpoint_id in self._endpoints:
                raise EndpointExistsError
            self._endpoints[endpoint.endpoint_id] = StoredEndpoint(endpoint, secrets)

    def get_endpoint(self, endpoint_id: str) -> StoredEndpoint | None:
        with self._lock:
            self._check()
            return self._endpoints.get(endpoint_id)

    def endpoints_of(self, tenant: str) -> list[Endpoint]:
        with self._lock:
            self._check()
            self.reads_of_directory += 1
            return sorted(
                (s.endpoint for s in self._endpoints.values() if s.endpoint.tenant == tenant),
                key=lambda e: (e.tenant, e.created_at, e.endpoint_id),
            )

    def all_endpoints(self) -> list[Endpoint]:
        with self._lock:
            self._check()
            return sorted(
                (s.endpoint for s in self._endpoints.values()),
                key=lambda e: (e.tenant, e.created_at, e.endpoint_id),
            )

    def remove_endpoint(self, endpoint_id: str) -> Endpoint | None:
        with self._lock:
            self._check()
            removed = self._endpoints.pop(endpoint_id, None)
            return removed.endpoint if removed else None

    def rotate_secret(self, endpoint_id: str, replaced: str, rotated: EndpointSecrets) -> bool:
        if rotated.previous is None or rotated.previous_until is None:
            raise ValueError("a rotation keeps the previous secret for the overlap")
        with self._lock:
            self._check()
            stored = self._endpoints.get(endpoint_id)
            if stored is None or stored.secrets.current != replaced:
                return False
            endpoint = dataclasses.replace(stored.endpoint, previous_secret_until=rotated.previous_until)
            self._endpoints[endpoint_id] = StoredEndpoint(endpoint, rotated)
            return True

    def set_enabled(self, endpoint_id: str, enabled: bool, reason: str | None, at: datetime) -> bool:
        with self._lock:
            self._check()
            stored = self._endpoints.get(endpoint_id)
            if stored is None:
                return False
            endpoint = dataclasses.replace(
                stored.endpoint,
                enabled=enabled,
                disabled_reason=None if enabled else (reason or "disabled"),
                disabled_at=None if enabled else at,
            )
            self._endpoints[endpoint_id] = StoredEndpoint(endpoint, stored.secrets)
            return True

    def record_attempt(self, message: DeliveryMessage, attempt: Attempt, expires_at: datetime) -> None:
        del expires_at  # the fake keeps everything
        with self._lock:
            self._check()
            key = (message.endpoint_id, message.event_time, message.webhook_id)
            before = self._deliveries.get(key)
            self._deliveries[key] = Delivery(
                endpoint_id=message.endpoint_id,
                webhook_id=message.webhook_id,
                event_type=message.event_type,
                job_id=message.job_id,
                event_time=message.event_time,
                state=attempt.outcome,
                attempts=(*(before.attempts if before else ()), attempt),
            )

    def get_delivery(self, message: DeliveryMessage) -> Delivery | None:
        with self._lock:
            self._check()
            return self._deliveries.get((message.endpoint_id, message.event_time, message.webhook_id))

    def deliveries_of(self, endpoint_id: str, limit: int) -> list[Delivery]:
        with self._lock:
            self._check()
            mine = [d for (owner, _, _), d in self._deliveries.items() if owner == endpoint_id]
            return sorted(mine, key=lambda d: (d.event_time, d.webhook_id), reverse=True)[:limit]


@dataclasses.dataclass
class RecordingDeliveryQueue:
    """DeliveryQueue that keeps what it was asked to do."""

    sent: list[DeliveryMessage] = dataclasses.field(default_factory=list)
    visibility: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    dead: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    unavailable: bool = False

    def send_batch(self, messages: list[DeliveryMessage]) -> None:
        if self.unavailable:
            raise StorageUnavailableError("the fake queue is down")
        self.sent.extend(messages)

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        self.visibility.append((receipt_handle, seconds))

    def dead_letter(self, body: str, reason: str) -> None:
        self.dead.append((body, str(reason)))


@dataclasses.dataclass
class ScriptedPoster:
    """WebhookPoster answering from a script (the last answer repeats), keeping every request."""

    answers: list[PostResult]
    requests: list[tuple[Destination, bytes, dict[str, str]]] = dataclasses.field(default_factory=list)

    def post(self, destination: Destination, body: bytes, headers: Mapping[str, str]) -> PostResult:
        self.requests.append((destination, body, dict(headers)))
        index = min(len(self.requests), len(self.answers)) - 1
        return self.answers[index]


def answer(
    status: int | None, *, retry_after: str | None = None, failure: TransportFailure | None = None
) -> PostResult:
    """A PostResult for a script: a status, or a transport failure with no status."""
    return PostResult(
        status=status,
        failure=failure,
        retry_after=retry_after,
        latency_ms=12,
    )
