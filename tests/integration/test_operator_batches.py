"""`outlast ops batches list` against moto through a stack's outputs
(tests.integration.test_operator_dlq.World): the open batches, oldest first, and their jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from shared.adapters.dynamodb_batches import DynamoOpenBatchStore
from shared.batches import BatchCall, BatchIntent, OpenBatch
from tests.integration.test_operator_dlq import World, create_world
from tests.support import jobs
from tests.support.aws import create_batches_table

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration


@pytest.fixture
def table(moto_endpoint: str) -> str:
    return create_batches_table(moto_endpoint)


@pytest.fixture
def world(
    moto_endpoint: str, resources: TestResources, capsys: pytest.CaptureFixture[str], table: str
) -> World:
    return create_world(moto_endpoint, resources, capsys, {"BatchesTableName": table})


def open_batch(batch_id: str, age: timedelta, *job_ids: str) -> OpenBatch:
    calls = tuple(
        BatchCall(job_id=job_id, hold="h", step_id="s0", attempt=1, final=True, model="gpt-5-mini", body={})
        for job_id in job_ids
    )
    return OpenBatch(batch_id=batch_id, model="gpt-5-mini", created_at=jobs.now_millis() - age, calls=calls)


def test_the_open_batches_are_listed_oldest_first_with_their_jobs(world: World, table: str) -> None:
    store = DynamoOpenBatchStore(world.dynamodb, table)
    store.put(open_batch("batch_new", timedelta(minutes=5), "job-c"))
    store.put(open_batch("batch_old", timedelta(hours=25), "job-a", "job-b"))

    listed = world.cli("batches", "list", "--json")
    human = world.cli("batches", "list")

    assert listed.code == 0, listed.err
    rows = listed.document["batches"]
    assert [row["batchId"] for row in rows] == ["batch_old", "batch_new"]
    assert rows[0]["jobIds"] == ["job-a", "job-b"]
    assert (rows[0]["overdue"], rows[1]["overdue"]) == (True, False)
    assert "OVERDUE" in human.out
    assert "job-c" in human.out


def test_orphaned_batches_and_unresolved_intents_are_shown(world: World, table: str) -> None:
    store = DynamoOpenBatchStore(world.dynamodb, table)
    intended = open_batch("unused", timedelta(minutes=1), "job-d")
    intent = BatchIntent(
        intent_id="feed0001", model=intended.model, created_at=intended.created_at, calls=intended.calls
    )
    store.put_intent(intent)
    assert store.put_orphan(intent.orphan("batch_orphan"))

    listed = world.cli("batches", "list", "--json")
    human = world.cli("batches", "list")

    assert listed.code == 0, listed.err
    [row] = listed.document["batches"]
    assert (row["batchId"], row["orphaned"]) == ("batch_orphan", True)
    assert [entry["intentId"] for entry in listed.document["intents"]] == ["feed0001"]
    assert listed.document["intents"][0]["jobIds"] == ["job-d"]
    assert "ORPHANED" in human.out
    assert "intent feed0001" in human.out


def test_a_stack_without_the_batch_tier_says_so(
    moto_endpoint: str, resources: TestResources, capsys: pytest.CaptureFixture[str]
) -> None:
    world = create_world(moto_endpoint, resources, capsys, {})

    refused = world.cli("batches", "list")

    assert refused.code == 2
    assert "no batch tier" in refused.err
