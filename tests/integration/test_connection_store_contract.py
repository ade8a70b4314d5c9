"""One contract for the connection store: the in-memory fake and the DynamoDB adapter (on moto) agree."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import boto3
import pytest

from shared.adapters.dynamodb_connections import DynamoConnectionStore
from shared.job import Caller
from shared.realtime import Connection, TicketRecord, ticket_hash
from shared.realtime_ports import ConnectionStore
from tests.realtime_fakes import InMemoryConnectionStore
from tests.support.aws import REGION, create_connections_table

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

ALICE = Caller(tenant="user:alice", sub="alice")
BOB = Caller(tenant="user:bob", sub="bob")
NOW = datetime(2030, 1, 15, 12, 0, 30, 250_000, tzinfo=UTC)


@pytest.fixture(params=["fake", "dynamodb"])
def store(request: pytest.FixtureRequest) -> ConnectionStore:
    if request.param == "fake":
        return InMemoryConnectionStore()
    resources: TestResources = request.getfixturevalue("resources")
    assert resources
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    table = create_connections_table(endpoint)
    return DynamoConnectionStore(boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION), table)


def _ticket(name: str, owner: Caller = ALICE, expires_in: timedelta = timedelta(seconds=60)) -> TicketRecord:
    return TicketRecord(ticket_hash=ticket_hash(name), owner=owner, expires_at=NOW + expires_in)


def test_a_ticket_is_taken_once_and_names_its_owner(store: ConnectionStore) -> None:
    store.put_ticket(_ticket("t1", BOB))

    assert store.take_ticket(ticket_hash("t1"), NOW) == BOB
    assert store.take_ticket(ticket_hash("t1"), NOW) is None


def test_an_expired_ticket_is_never_taken(store: ConnectionStore) -> None:
    store.put_ticket(_ticket("t1"))

    assert store.take_ticket(ticket_hash("t1"), NOW + timedelta(seconds=60)) is None
    assert store.take_ticket(ticket_hash("t1"), NOW + timedelta(seconds=59, milliseconds=999)) == ALICE


def test_an_unknown_ticket_is_none(store: ConnectionStore) -> None:
    assert store.take_ticket(ticket_hash("never issued"), NOW) is None


def test_concurrent_takes_of_one_ticket_have_one_winner(store: ConnectionStore) -> None:
    store.put_ticket(_ticket("t1"))
    results: list[Caller | None] = []
    barrier = threading.Barrier(4)

    def take() -> None:
        barrier.wait()
        results.append(store.take_ticket(ticket_hash("t1"), NOW))

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results, key=str) == sorted([ALICE, None, None, None], key=str)


def test_connections_are_kept_per_owner(store: ConnectionStore) -> None:
    store.add_connection(Connection(connection_id="a1", owner=ALICE, connected_at=NOW))
    store.add_connection(Connection(connection_id="a2", owner=ALICE, connected_at=NOW + timedelta(seconds=1)))
    store.add_connection(Connection(connection_id="b1", owner=BOB, connected_at=NOW))

    alices = sorted(store.connections_of(ALICE), key=lambda c: c.connection_id)

    assert [(c.connection_id, c.owner, c.connected_at) for c in alices] == [
        ("a1", ALICE, NOW),
        ("a2", ALICE, NOW + timedelta(seconds=1)),
    ]
    assert [c.connection_id for c in store.connections_of(BOB)] == ["b1"]
    assert store.connections_of(Caller(tenant="acme", sub="alice")) == []


def test_removing_forgets_one_connection_and_tolerates_a_missing_one(store: ConnectionStore) -> None:
    store.add_connection(Connection(connection_id="a1", owner=ALICE, connected_at=NOW))
    store.add_connection(Connection(connection_id="a2", owner=ALICE, connected_at=NOW))

    store.remove_connection(ALICE, "a1")
    store.remove_connection(ALICE, "a1")
    store.remove_connection(BOB, "a2")  # not Bob's: nothing happens

    assert [c.connection_id for c in store.connections_of(ALICE)] == ["a2"]
