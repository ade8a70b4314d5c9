"""One contract for the running slots (DESIGN.md, "Fairness between tenants"): the in-memory fake
and the DynamoDB adapter (on moto) agree condition for condition, so the worker's unit tests with
the fake say what the worker does against DynamoDB. The cap is the project's own code: it is
proven here under concurrency, against both, with single-item conditional writes (no moto
transaction, which is not atomic with a stream)."""

from __future__ import annotations

import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from shared.adapters.dynamodb_slots import DynamoSlotStore
from shared.ports import Lease
from shared.slots import SlotLostError, SlotStore, take_any
from tests.slot_fakes import InMemorySlotStore
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC).replace(microsecond=0)
LEASE = timedelta(seconds=60)
CAP = 3
CLAIMS = 30


@pytest.fixture(params=["fake", "dynamodb"])
def slots(request: pytest.FixtureRequest) -> SlotStore:
    if request.param == "fake":
        return InMemorySlotStore()
    resources: TestResources = request.getfixturevalue("resources")
    return DynamoSlotStore(Storage(resources).dynamodb, resources.slots_table)


def _lease(at: datetime = NOW) -> Lease:
    return Lease(token=secrets.token_hex(16), expires_at=at + LEASE)


def test_thirty_concurrent_claims_for_a_tenant_capped_at_three_hold_three_slots(slots: SlotStore) -> None:
    # Given 30 claims of one tenant capped at 3, all at once
    leases = [_lease() for _ in range(CLAIMS)]
    start = threading.Barrier(CLAIMS)

    def claim(lease: Lease) -> int | None:
        start.wait()
        return take_any(slots, "acme", CAP, lease, NOW)

    with ThreadPoolExecutor(CLAIMS) as pool:
        taken = list(pool.map(claim, leases))

    # Then exactly three hold a slot, each a different one; the other 27 found none free
    held = [slot for slot in taken if slot is not None]
    assert sorted(held) == [0, 1, 2]
    # And another tenant's slots are its own
    assert take_any(slots, "globex", CAP, _lease(), NOW) is not None


def test_claims_that_take_and_release_concurrently_never_hold_more_than_the_cap(slots: SlotStore) -> None:
    # Given 30 workers, each claiming, holding and releasing a slot of one tenant capped at 3
    holding, most = 0, 0
    count = threading.Lock()
    start = threading.Barrier(CLAIMS)

    def work(_: int) -> int:
        nonlocal holding, most
        start.wait()
        ran = 0
        for _ in range(5):
            lease = _lease()
            slot = take_any(slots, "acme", CAP, lease, NOW)
            if slot is None:
                continue
            with count:
                holding += 1
                most = max(most, holding)
            with count:
                holding -= 1
            assert slots.release("acme", slot, lease.token)
            ran += 1
        return ran

    with ThreadPoolExecutor(CLAIMS) as pool:
        ran = sum(pool.map(work, range(CLAIMS)))

    # Then some claims ran, and at no moment did more than three hold a slot
    assert ran > 0
    assert most <= CAP


def test_a_killed_workers_slot_frees_at_its_lease_expiry(slots: SlotStore) -> None:
    # Given a tenant capped at one whose only slot a worker took, then died (no release)
    dead = _lease()
    assert take_any(slots, "acme", 1, dead, NOW) == 0

    # Then until its lease expires no other claim gets it
    assert take_any(slots, "acme", 1, _lease(), dead.expires_at) is None
    # And once the lease has expired the next claim does
    later = dead.expires_at + timedelta(milliseconds=1)
    successor = _lease(later)
    assert take_any(slots, "acme", 1, successor, later) == 0
    # And the dead worker's token can no longer touch it
    assert not slots.release("acme", 0, dead.token)
    with pytest.raises(SlotLostError):
        slots.extend("acme", 0, Lease(dead.token, later + LEASE))
    assert take_any(slots, "acme", 1, _lease(later), later) is None


def test_only_its_own_token_releases_a_slot_early(slots: SlotStore) -> None:
    holder = _lease()
    assert slots.take("acme", 0, holder, NOW)

    assert not slots.release("acme", 0, "someone-else")
    assert not slots.take("acme", 0, _lease(), NOW)
    assert slots.release("acme", 0, holder.token)
    assert not slots.release("acme", 0, holder.token)  # released once
    assert slots.take("acme", 0, _lease(), NOW)


def test_a_heartbeat_extends_the_slot_with_the_lease(slots: SlotStore) -> None:
    holder = _lease()
    assert slots.take("acme", 0, holder, NOW)

    extended = Lease(holder.token, holder.expires_at + LEASE)
    slots.extend("acme", 0, extended)

    past_first_expiry = holder.expires_at + timedelta(seconds=1)
    assert not slots.take("acme", 0, _lease(past_first_expiry), past_first_expiry)
    with pytest.raises(SlotLostError):
        slots.extend("acme", 0, Lease("someone-else", extended.expires_at))
