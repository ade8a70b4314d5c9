"""One contract for the endpoint store: the in-memory fake and the DynamoDB adapter (on moto) agree."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import boto3
import pytest

from shared.adapters.dynamodb_webhooks import DynamoEndpointStore
from shared.webhooks.endpoints import (
    ALL_EVENTS,
    Attempt,
    DeliveryMessage,
    DeliveryState,
    Endpoint,
    EndpointSecrets,
    new_endpoint_id,
)
from shared.webhooks.events import EventType
from shared.webhooks.ports import EndpointExistsError, EndpointStore
from shared.webhooks.signing import generate_secret
from tests.support.aws import REGION, create_webhooks_table
from tests.webhook_fakes import InMemoryEndpointStore

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

NOW = datetime(2030, 1, 15, 12, 0, 30, 250_000, tzinfo=UTC)
JOB_ID = "6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b"


@pytest.fixture(params=["fake", "dynamodb"])
def store(request: pytest.FixtureRequest) -> EndpointStore:
    if request.param == "fake":
        return InMemoryEndpointStore()
    resources: TestResources = request.getfixturevalue("resources")
    assert resources
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    table = create_webhooks_table(endpoint)
    return DynamoEndpointStore(boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION), table)


def _endpoint(
    tenant: str = "acme", events: tuple[EventType, ...] = ALL_EVENTS, **changes: object
) -> Endpoint:
    values: dict[str, object] = {
        "endpoint_id": new_endpoint_id(),
        "tenant": tenant,
        "url": f"https://hooks.{tenant}.example/outlast",
        "events": events,
        "created_at": NOW,
        **changes,
    }
    return Endpoint(**values)  # type: ignore[arg-type]


def _message(
    endpoint: Endpoint, *, minutes: int = 0, event: EventType = EventType.JOB_SUCCEEDED
) -> DeliveryMessage:
    return DeliveryMessage(
        endpoint_id=endpoint.endpoint_id,
        tenant=endpoint.tenant,
        webhook_id=f"{JOB_ID}.0.{event.value}",
        event_type=event,
        job_id=JOB_ID,
        event_time=NOW + timedelta(minutes=minutes),
        body='{"type":"job.succeeded"}',
    )


def _attempt(number: int, outcome: DeliveryState, status: int | None = 500) -> Attempt:
    return Attempt(
        number=number,
        at=NOW + timedelta(seconds=number),
        status=status,
        latency_ms=None if status is None else 40 + number,
        failure="connection" if status is None else None,
        outcome=outcome,
    )


def test_an_endpoint_is_stored_with_its_secret_and_listed_without_it(store: EndpointStore) -> None:
    endpoint = _endpoint(events=(EventType.JOB_FAILED, EventType.JOB_CANCELED))
    secrets = EndpointSecrets(current=generate_secret())
    store.add_endpoint(endpoint, secrets)

    stored = store.get_endpoint(endpoint.endpoint_id)

    assert stored is not None
    assert stored.endpoint == endpoint
    assert stored.secrets == secrets
    assert store.endpoints_of("acme") == [endpoint]
    assert store.all_endpoints() == [endpoint]


def test_an_endpoint_id_is_written_once(store: EndpointStore) -> None:
    endpoint = _endpoint()
    store.add_endpoint(endpoint, EndpointSecrets(current=generate_secret()))

    with pytest.raises(EndpointExistsError):
        store.add_endpoint(
            Endpoint(**{**endpoint.__dict__, "url": "https://elsewhere.example/"}),
            EndpointSecrets(current=generate_secret()),
        )

    stored = store.get_endpoint(endpoint.endpoint_id)
    assert stored is not None
    assert stored.endpoint.url == endpoint.url


def test_endpoints_are_kept_per_tenant(store: EndpointStore) -> None:
    acme = [_endpoint("acme"), _endpoint("acme", created_at=NOW + timedelta(seconds=1))]
    globex = _endpoint("globex")
    for endpoint in (*acme, globex):
        store.add_endpoint(endpoint, EndpointSecrets(current=generate_secret()))

    assert store.endpoints_of("acme") == acme
    assert store.endpoints_of("globex") == [globex]
    assert store.endpoints_of("initech") == []
    assert store.all_endpoints() == [*acme, globex]


def test_a_rotation_applies_only_to_the_secret_it_replaces(store: EndpointStore) -> None:
    endpoint = _endpoint()
    first = EndpointSecrets(current=generate_secret())
    store.add_endpoint(endpoint, first)
    rotated = first.rotated(generate_secret(), NOW)

    assert store.rotate_secret(endpoint.endpoint_id, first.current, rotated)
    assert not store.rotate_secret(endpoint.endpoint_id, first.current, first.rotated(generate_secret(), NOW))
    assert not store.rotate_secret("ep_0000000000000000", first.current, rotated)

    stored = store.get_endpoint(endpoint.endpoint_id)
    assert stored is not None
    assert stored.secrets == rotated
    assert stored.secrets.signing(NOW + timedelta(hours=23)) == [rotated.current, first.current]
    assert stored.secrets.signing(NOW + timedelta(hours=24)) == [rotated.current]
    assert stored.endpoint.previous_secret_until == NOW + timedelta(hours=24)
    assert store.endpoints_of("acme")[0].previous_secret_until == NOW + timedelta(hours=24)


def test_disabling_records_why_and_enabling_clears_it(store: EndpointStore) -> None:
    endpoint = _endpoint()
    store.add_endpoint(endpoint, EndpointSecrets(current=generate_secret()))

    assert store.set_enabled(endpoint.endpoint_id, False, "410 Gone", NOW)
    (disabled,) = store.endpoints_of("acme")
    assert (disabled.enabled, disabled.disabled_reason, disabled.disabled_at) == (False, "410 Gone", NOW)

    assert store.set_enabled(endpoint.endpoint_id, True, None, NOW)
    assert store.endpoints_of("acme") == [endpoint]
    assert not store.set_enabled("ep_0000000000000000", False, "no such endpoint", NOW)


def test_removing_returns_the_endpoint_once(store: EndpointStore) -> None:
    endpoint = _endpoint()
    store.add_endpoint(endpoint, EndpointSecrets(current=generate_secret()))

    assert store.remove_endpoint(endpoint.endpoint_id) == endpoint
    assert store.remove_endpoint(endpoint.endpoint_id) is None
    assert store.get_endpoint(endpoint.endpoint_id) is None
    assert store.endpoints_of("acme") == []


def test_attempts_are_appended_to_their_delivery_in_order(store: EndpointStore) -> None:
    endpoint = _endpoint()
    store.add_endpoint(endpoint, EndpointSecrets(current=generate_secret()))
    message = _message(endpoint)
    attempts = [
        _attempt(1, DeliveryState.RETRYING),
        _attempt(2, DeliveryState.RETRYING, status=None),
        _attempt(3, DeliveryState.DELIVERED, status=204),
    ]

    assert store.get_delivery(message) is None
    for attempt in attempts:
        store.record_attempt(message, attempt, NOW + timedelta(days=30))

    delivery = store.get_delivery(message)
    assert delivery is not None
    assert delivery.state is DeliveryState.DELIVERED
    assert delivery.attempts == tuple(attempts)
    assert (delivery.webhook_id, delivery.job_id, delivery.event_type) == (
        message.webhook_id,
        JOB_ID,
        EventType.JOB_SUCCEEDED,
    )
    assert delivery.event_time == message.event_time


def test_deliveries_list_newest_first_per_endpoint(store: EndpointStore) -> None:
    mine, other = _endpoint(), _endpoint()
    for endpoint in (mine, other):
        store.add_endpoint(endpoint, EndpointSecrets(current=generate_secret()))
    for minutes in (0, 2, 1):
        store.record_attempt(
            _message(mine, minutes=minutes), _attempt(1, DeliveryState.RETRYING), NOW + timedelta(days=30)
        )
    store.record_attempt(_message(other), _attempt(1, DeliveryState.DEAD), NOW + timedelta(days=30))

    listed = store.deliveries_of(mine.endpoint_id, limit=2)

    assert [d.event_time for d in listed] == [NOW + timedelta(minutes=2), NOW + timedelta(minutes=1)]
    assert {d.endpoint_id for d in listed} == {mine.endpoint_id}
    assert [d.state for d in store.deliveries_of(other.endpoint_id, limit=10)] == [DeliveryState.DEAD]
