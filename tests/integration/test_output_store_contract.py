"""One contract for the output events store: the in-memory fake and the DynamoDB adapter (on moto) agree."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import boto3
import pytest

from shared.adapters.dynamodb_output import DynamoOutputEventStore, event_item
from shared.adapters.item_size import item_size
from shared.output import START, OutputCursor, OutputEvent
from shared.output_ports import OutputEventStore
from tests.output_fakes import InMemoryOutputEventStore
from tests.support.aws import REGION

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

NOW = datetime(2030, 1, 15, 12, 0, 30, tzinfo=UTC)
LATER = NOW + timedelta(hours=24)
JOB = "6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b"
OTHER = "7a2e3d4c-5b6a-4f9e-8d7c-6b5a4f3e2d1c"


@pytest.fixture(params=["fake", "dynamodb"])
def store(request: pytest.FixtureRequest) -> OutputEventStore:
    if request.param == "fake":
        return InMemoryOutputEventStore()
    resources: TestResources = request.getfixturevalue("resources")
    client = boto3.client("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=REGION)
    return DynamoOutputEventStore(client, resources.output_events_table)


def _event(attempt: int, seq: int, text: str = "x", job_id: str = JOB) -> OutputEvent:
    return OutputEvent(job_id=job_id, attempt=attempt, seq=seq, text=text)


def test_events_come_back_in_attempt_then_seq_order_after_the_cursor(store: OutputEventStore) -> None:
    # Given events written out of order, across attempts that pass 9 and 99 (numeric, not text, order)
    for attempt, seq in [(10, 1), (2, 10), (2, 9), (1, 1), (2, 100), (1, 2)]:
        store.put_event(_event(attempt, seq), LATER)
    store.put_event(_event(1, 3, job_id=OTHER), LATER)

    # Then
    assert [e.position for e in store.events_after(JOB, START, 100, NOW)] == [
        OutputCursor(1, 1),
        OutputCursor(1, 2),
        OutputCursor(2, 9),
        OutputCursor(2, 10),
        OutputCursor(2, 100),
        OutputCursor(10, 1),
    ]
    assert [e.position for e in store.events_after(JOB, OutputCursor(2, 9), 2, NOW)] == [
        OutputCursor(2, 10),
        OutputCursor(2, 100),
    ]


def test_an_event_is_written_once(store: OutputEventStore) -> None:
    store.put_event(_event(1, 1, "first"), LATER)
    store.put_event(_event(1, 1, "second"), LATER)

    assert [e.text for e in store.events_after(JOB, START, 10, NOW)] == ["first"]


def test_an_expired_event_is_gone_before_ttl_deletes_it(store: OutputEventStore) -> None:
    store.put_event(_event(1, 1, "old"), NOW + timedelta(seconds=1))
    store.put_event(_event(1, 2, "live"), LATER)

    assert [e.text for e in store.events_after(JOB, START, 10, NOW + timedelta(seconds=1))] == ["live"]


def test_text_round_trips_whatever_it_holds(store: OutputEventStore) -> None:
    text = 'naïve ✓ 🚀 \n\t quotes " and # and .'
    store.put_event(_event(1, 1, text), LATER)

    assert store.events_after(JOB, START, 1, NOW)[0] == _event(1, 1, text)


def test_a_full_event_is_one_write_unit() -> None:
    # The worker writes at most 900 bytes of text (the flush policy): with its keys, still under 1 KB.
    largest = OutputEvent(job_id=JOB, attempt=999_999_999, seq=999_999_999, text="é" * 450)

    assert item_size(event_item(largest, LATER)) <= 1024
