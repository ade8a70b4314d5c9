"""The operator's webhook moves with fakes: add behind the egress guard, rotate, the redrive plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from outlast.operator import webhooks as w
from outlast.operator.plan import DeadLetter
from shared.errors import EgressRefusal, EgressRefusedError
from shared.webhooks.endpoints import ALL_EVENTS, Attempt, DeliveryMessage, DeliveryState
from shared.webhooks.events import EventType
from tests.webhook_fakes import InMemoryEndpointStore

NOW = datetime(2030, 3, 17, 12, 0, tzinfo=UTC)
JOB_ID = "6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b"


def _resolve(host: str, port: int) -> list[str]:
    del port
    return {"hooks.example": ["93.184.215.14"], "inside.example": ["10.1.2.3"]}.get(host, [])


def _add(store: InMemoryEndpointStore, url: str = "https://hooks.example/x", *, local: bool = False) -> str:
    endpoint, _ = w.add_endpoint(
        store, "acme", url, events=ALL_EVENTS, now=NOW, resolve=_resolve, local_only=local
    )
    return endpoint.endpoint_id


def _letter(message: DeliveryMessage | None, message_id: str = "m1") -> DeadLetter:
    return DeadLetter(
        message_id=message_id,
        body=message.encode() if message else "not ours",
        job_id=None,
        trace_id=None,
        reason="attempts_exhausted",
        receive_count=1,
        sent_at=NOW,
    )


def _message(endpoint_id: str) -> DeliveryMessage:
    return DeliveryMessage(
        endpoint_id=endpoint_id,
        tenant="acme",
        webhook_id=f"{JOB_ID}.0.job.succeeded",
        event_type=EventType.JOB_SUCCEEDED,
        job_id=JOB_ID,
        event_time=NOW,
        body="{}",
    )


def test_add_stores_an_endpoint_and_returns_its_secret_once() -> None:
    store = InMemoryEndpointStore()
    endpoint, secret = w.add_endpoint(
        store,
        "acme",
        "https://hooks.example/x",
        events=(EventType.JOB_FAILED,),
        now=NOW,
        resolve=_resolve,
        local_only=False,
    )

    stored = store.get_endpoint(endpoint.endpoint_id)
    assert stored is not None
    assert stored.secrets.current == secret
    assert secret.startswith("whsec_")
    assert stored.endpoint.events == (EventType.JOB_FAILED,)


@pytest.mark.parametrize(
    ("url", "local", "reason"),
    [
        ("https://inside.example/x", False, EgressRefusal.ADDRESS),
        ("http://127.0.0.1:9000/x", False, EgressRefusal.SCHEME),
        ("http://169.254.169.254/latest", True, EgressRefusal.ADDRESS),
    ],
)
def test_add_refuses_what_the_guard_refuses_and_stores_nothing(
    url: str, local: bool, reason: EgressRefusal
) -> None:
    store = InMemoryEndpointStore()

    with pytest.raises(EgressRefusedError) as refused:
        _add(store, url, local=local)

    assert refused.value.reason is reason
    assert store.all_endpoints() == []


def test_loopback_over_http_is_allowed_for_the_local_stack_only() -> None:
    store = InMemoryEndpointStore()

    assert _add(store, "http://127.0.0.1:9000/x", local=True)


def test_a_second_rotation_inside_the_overlap_needs_force() -> None:
    store = InMemoryEndpointStore()
    endpoint_id = _add(store)
    original = store.get_endpoint(endpoint_id)
    assert original is not None

    rotated, secret = w.rotate(store, endpoint_id, NOW, force=False)
    assert (rotated.current, rotated.previous) == (secret, original.secrets.current)
    assert rotated.previous_until == NOW + timedelta(hours=24)
    with pytest.raises(w.RotationRefused, match="--force"):
        w.rotate(store, endpoint_id, NOW + timedelta(hours=1), force=False)
    again, _ = w.rotate(store, endpoint_id, NOW + timedelta(hours=1), force=True)
    assert again.previous == secret
    later, _ = w.rotate(store, endpoint_id, NOW + timedelta(hours=26), force=False)
    assert later.previous == again.current
    with pytest.raises(w.RotationRefused, match="no endpoint"):
        w.rotate(store, "ep_0000000000000000", NOW, force=True)


def test_the_redrive_plan_per_endpoint_and_delivery_state() -> None:
    store = InMemoryEndpointStore()
    enabled, disabled, delivered, removed = (_add(store) for _ in range(4))
    store.set_enabled(disabled, False, "the receiver answered 410 Gone", NOW)
    store.record_attempt(
        _message(delivered), Attempt(1, NOW, 200, 10, None, DeliveryState.DELIVERED), NOW + timedelta(days=30)
    )
    store.remove_endpoint(removed)
    letters = [_letter(_message(e), f"m-{e}") for e in (enabled, disabled, delivered, removed)] + [
        _letter(None, "junk")
    ]

    steps = w.plan(letters, store, w.Selection(everything=True))

    assert [s.action for s in steps] == [
        w.Action.REDRIVE,
        w.Action.KEEP_DISABLED,
        w.Action.DROP_DELIVERED,
        w.Action.DROP_REMOVED,
        w.Action.KEEP_UNREADABLE,
    ]
    assert "webhooks enable" in steps[1].why
    by_endpoint = w.plan(letters, store, w.Selection(endpoint_ids=frozenset({enabled})))
    assert [s.letter.message_id for s in by_endpoint] == [f"m-{enabled}"]
    by_id = w.plan(letters, store, w.Selection(webhook_ids=frozenset({f"{JOB_ID}.0.job.succeeded"})))
    assert len(by_id) == 4  # every readable message carries that id here; the junk is not picked
