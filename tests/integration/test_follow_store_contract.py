"""One contract for the follow store: the in-memory fake and the DynamoDB adapter (on moto) agree.

Follows live beside the connections (one table): the same fake answers both ports, and the adapter
pair shares a table, so forgetting a connection forgets its follows in both.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NamedTuple

import boto3
import pytest

from shared.adapters.dynamodb_connections import DynamoConnectionStore, DynamoFollowStore
from shared.job import Caller
from shared.output_ports import ConnectionClosedError, Follow, FollowStore, TooManyFollowsError
from shared.realtime import Connection
from shared.realtime_ports import ConnectionStore
from tests.realtime_fakes import InMemoryConnectionStore
from tests.support.aws import REGION, create_connections_table

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

ALICE = Caller(tenant="user:alice", sub="alice")
NOW = datetime(2030, 1, 15, 12, 0, 30, 250_000, tzinfo=UTC)
JOB_A = "6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b"
JOB_B = "7a2e3d4c-5b6a-4f9e-8d7c-6b5a4f3e2d1c"


class Stores(NamedTuple):
    connections: ConnectionStore
    follows: FollowStore


@pytest.fixture(params=["fake", "dynamodb"])
def stores(request: pytest.FixtureRequest) -> Stores:
    if request.param == "fake":
        fake = InMemoryConnectionStore()
        return Stores(fake, fake)
    resources: TestResources = request.getfixturevalue("resources")
    assert resources
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    table = create_connections_table(endpoint)
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION)
    return Stores(DynamoConnectionStore(client, table), DynamoFollowStore(client, table))


def _connect(stores: Stores, connection_id: str) -> None:
    stores.connections.add_connection(Connection(connection_id=connection_id, owner=ALICE, connected_at=NOW))


def _follow(job_id: str, connection_id: str) -> Follow:
    return Follow(job_id=job_id, connection_id=connection_id, owner=ALICE, connected_at=NOW)


def test_a_follow_is_read_by_its_job_with_its_connection_and_owner(stores: Stores) -> None:
    _connect(stores, "c1")
    _connect(stores, "c2")

    stores.follows.add_follow(_follow(JOB_A, "c1"), limit=20)
    stores.follows.add_follow(_follow(JOB_A, "c2"), limit=20)
    stores.follows.add_follow(_follow(JOB_A, "c2"), limit=20)  # twice is one follow

    assert sorted(stores.follows.followers(JOB_A), key=lambda f: f.connection_id) == [
        _follow(JOB_A, "c1"),
        _follow(JOB_A, "c2"),
    ]
    assert stores.follows.followers(JOB_B) == []


def test_a_connection_follows_at_most_the_limit_but_may_repeat_one(stores: Stores) -> None:
    _connect(stores, "c1")
    stores.follows.add_follow(_follow(JOB_A, "c1"), limit=1)

    with pytest.raises(TooManyFollowsError):
        stores.follows.add_follow(_follow(JOB_B, "c1"), limit=1)
    stores.follows.add_follow(_follow(JOB_A, "c1"), limit=1)

    assert stores.follows.followers(JOB_B) == []


def test_a_connection_that_is_not_recorded_cannot_follow(stores: Stores) -> None:
    with pytest.raises(ConnectionClosedError):
        stores.follows.add_follow(_follow(JOB_A, "never-connected"), limit=20)

    assert stores.follows.followers(JOB_A) == []


def test_an_unfollow_frees_its_place_and_tolerates_a_missing_one(stores: Stores) -> None:
    _connect(stores, "c1")
    stores.follows.add_follow(_follow(JOB_A, "c1"), limit=1)

    stores.follows.remove_follow(ALICE, "c1", JOB_A)
    stores.follows.remove_follow(ALICE, "c1", JOB_A)
    stores.follows.remove_follow(ALICE, "gone", JOB_A)  # no connection: nothing is created

    assert stores.follows.followers(JOB_A) == []
    stores.follows.add_follow(_follow(JOB_B, "c1"), limit=1)
    assert stores.follows.followers(JOB_B) == [_follow(JOB_B, "c1")]
    assert [c.connection_id for c in stores.connections.connections_of(ALICE)] == ["c1"]


def test_forgetting_a_connection_forgets_its_follows(stores: Stores) -> None:
    _connect(stores, "c1")
    _connect(stores, "c2")
    stores.follows.add_follow(_follow(JOB_A, "c1"), limit=20)
    stores.follows.add_follow(_follow(JOB_B, "c1"), limit=20)
    stores.follows.add_follow(_follow(JOB_A, "c2"), limit=20)

    stores.connections.remove_connection(ALICE, "c1")

    assert stores.follows.followers(JOB_A) == [_follow(JOB_A, "c2")]
    assert stores.follows.followers(JOB_B) == []


def test_forgetting_a_follower_leaves_the_others(stores: Stores) -> None:
    _connect(stores, "c1")
    _connect(stores, "c2")
    stores.follows.add_follow(_follow(JOB_A, "c1"), limit=20)
    stores.follows.add_follow(_follow(JOB_A, "c2"), limit=20)

    stores.follows.forget_follower(JOB_A, "c1")

    assert stores.follows.followers(JOB_A) == [_follow(JOB_A, "c2")]
