"""Running slots, unit: the adapter's conditions as sent, the fake's under 30 concurrent claims,
the order claims try the slots in, and the jittered delay of a deferral for want of one."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from shared.adapters.dynamodb_slots import DynamoSlotStore
from shared.ports import Lease
from shared.slots import SlotLostError, slot_order, slot_retry_delay, take_any
from tests.slot_fakes import InMemorySlotStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = Lease("token-1", NOW + timedelta(seconds=60))


class RecordingDynamo:
    """Records each call; refuses with ConditionalCheckFailedException when told to."""

    def __init__(self, refuse: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.refuse = refuse

    def _answer(self, name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((name, kwargs))
        if self.refuse:
            raise ClientError({"Error": {"Code": "ConditionalCheckFailedException"}}, name)
        return {}

    def put_item(self, **kwargs: Any) -> dict[str, Any]:
        return self._answer("put_item", kwargs)

    def update_item(self, **kwargs: Any) -> dict[str, Any]:
        return self._answer("update_item", kwargs)

    def delete_item(self, **kwargs: Any) -> dict[str, Any]:
        return self._answer("delete_item", kwargs)


def _store(refuse: bool = False) -> tuple[DynamoSlotStore, RecordingDynamo]:
    client = RecordingDynamo(refuse)
    return DynamoSlotStore(client, "slots"), client  # type: ignore[arg-type]


def test_take_is_a_put_on_an_absent_or_expired_slot_carrying_the_token_and_expiry() -> None:
    store, client = _store()

    assert store.take("acme", 2, LEASE, NOW)

    [(name, call)] = client.calls
    assert name == "put_item"
    assert call["Item"] == {
        "pk": {"S": "acme#2"},
        "leaseToken": {"S": "token-1"},
        "expiresAt": {"N": str(int(LEASE.expires_at.timestamp() * 1000))},
    }
    assert call["ConditionExpression"] == "attribute_not_exists(#pk) OR #expires < :now"
    assert call["ExpressionAttributeValues"] == {":now": {"N": str(int(NOW.timestamp() * 1000))}}


def test_a_refused_take_is_false_and_a_refused_extend_is_a_lost_slot() -> None:
    store, _ = _store(refuse=True)

    assert not store.take("acme", 0, LEASE, NOW)
    assert not store.release("acme", 0, "token-1")
    with pytest.raises(SlotLostError):
        store.extend("acme", 0, LEASE)


def test_extend_and_release_are_conditional_on_the_token() -> None:
    store, client = _store()

    store.extend("acme", 1, LEASE)
    assert store.release("acme", 1, "token-1")

    for _, call in client.calls:
        assert call["Key"] == {"pk": {"S": "acme#1"}}
        assert call["ConditionExpression"] == "#token = :token"
        assert call["ExpressionAttributeValues"][":token"] == {"S": "token-1"}


def test_thirty_concurrent_claims_on_the_fake_hold_at_most_three_slots() -> None:
    slots = InMemorySlotStore()
    start = threading.Barrier(30)

    def claim(n: int) -> int | None:
        start.wait()
        return take_any(slots, "acme", 3, Lease(f"t{n}", NOW + timedelta(seconds=60)), NOW)

    with ThreadPoolExecutor(30) as pool:
        taken = [slot for slot in pool.map(claim, range(30)) if slot is not None]

    assert sorted(taken) == [0, 1, 2]
    assert slots.holders("acme", NOW) == 3


def test_claims_try_every_slot_once_from_a_random_one() -> None:
    order = slot_order(5, random.Random(7))

    assert sorted(order) == [0, 1, 2, 3, 4]
    assert list(order) == [(order[0] + k) % 5 for k in range(5)]


@pytest.mark.parametrize(
    ("base", "draw", "delay"),
    [(5, 0.0, 2), (5, 0.5, 5), (5, 0.999, 7), (600, 0.9999, 900), (0.5, 0.0, 1)],
)
def test_a_deferral_waits_half_to_one_and_a_half_times_the_stages_delay_in_whole_seconds(base, draw, delay):
    # 600 s is the most synth accepts: its longest jittered delay is SQS's longest, 900 s
    assert slot_retry_delay(base, draw) == delay
