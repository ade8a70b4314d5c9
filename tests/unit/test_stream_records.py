"""StreamRecord: the few facts the relay reads from a DynamoDB stream record (NEW_IMAGE view)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from shared import resources as r
from shared.stream_records import StreamRecord, UnreadableRecordError

JOB_ID = "0b9e4c36-5d55-4a8b-9a11-8f1b7f3f1c2e"


def raw(**changes: Any) -> dict[str, Any]:
    """A job INSERT as Lambda delivers it, with top-level keys replaced by `changes`."""
    record: dict[str, Any] = {
        "eventID": "c81e728d9d4c2f636f067f89cc14862c",
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": 1_767_225_600,
            "Keys": {r.PARTITION_KEY: {"S": f"JOB#{JOB_ID}"}, r.SORT_KEY: {"S": "JOB"}},
            "NewImage": {
                r.PARTITION_KEY: {"S": f"JOB#{JOB_ID}"},
                r.SORT_KEY: {"S": "JOB"},
                r.TYPE_ATTRIBUTE: {"S": r.JOB_ITEM_TYPE},
                "jobId": {"S": JOB_ID},
                "attempts": {"N": "0"},
            },
            "SequenceNumber": "111100000000012345678901",
            "SizeBytes": 180,
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/jobs/stream/2026-01-01T00:00:00.000",
    }
    record.update(changes)
    return record


def with_image(image: Any) -> dict[str, Any]:
    record = raw()
    record["dynamodb"] = {**record["dynamodb"], "NewImage": image}
    return record


def test_a_job_insert_is_read() -> None:
    record = StreamRecord.parse(raw())

    assert record.event_name == "INSERT"
    assert record.sequence_number == "111100000000012345678901"
    assert record.item_type == r.JOB_ITEM_TYPE
    assert record.job_id == JOB_ID


def test_fields_the_relay_does_not_read_are_ignored() -> None:
    # Lambda adds fields over time (userIdentity for TTL deletes, new metadata): never a failure
    record = StreamRecord.parse(raw(userIdentity={"type": "Service"}, somethingNew=[1, 2]))

    assert record.job_id == JOB_ID


def test_a_record_without_a_new_image_has_no_type_or_job_id() -> None:
    # A REMOVE (or a KEYS_ONLY view) carries no NewImage
    record = raw(eventName="REMOVE")
    del record["dynamodb"]["NewImage"]

    parsed = StreamRecord.parse(record)

    assert (parsed.event_name, parsed.item_type, parsed.job_id) == ("REMOVE", None, None)


@pytest.mark.parametrize(
    "image",
    [
        pytest.param({"type": {"N": "1"}, "jobId": {"N": "7"}}, id="numbers-not-strings"),
        pytest.param({"type": {"NULL": True}, "jobId": {"NULL": True}}, id="nulls"),
        pytest.param({"type": {"S": 5}, "jobId": {"S": ["x"]}}, id="S-not-a-string"),
        pytest.param({}, id="attributes-missing"),
    ],
)
def test_attributes_of_another_type_read_as_absent(image: dict[str, Any]) -> None:
    parsed = StreamRecord.parse(with_image(image))

    assert (parsed.item_type, parsed.job_id) == (None, None)


def test_an_input_item_reads_as_its_type() -> None:
    parsed = StreamRecord.parse(with_image({"type": {"S": r.INPUT_ITEM_TYPE}, "jobId": {"S": JOB_ID}}))

    assert parsed.item_type == r.INPUT_ITEM_TYPE


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param({"eventName": None}, id="event-name-null"),
        pytest.param({"eventName": 3}, id="event-name-not-a-string"),
        pytest.param({"dynamodb": None}, id="dynamodb-null"),
        pytest.param({"dynamodb": {"NewImage": {}}}, id="no-sequence-number"),
        pytest.param({"dynamodb": {"SequenceNumber": ""}}, id="empty-sequence-number"),
        pytest.param(
            {"dynamodb": {"SequenceNumber": "1", "NewImage": {"type": "job"}}}, id="image-not-typed"
        ),
    ],
)
def test_a_malformed_record_does_not_validate(broken: dict[str, Any]) -> None:
    with pytest.raises(UnreadableRecordError):
        StreamRecord.parse(raw(**broken))


@pytest.mark.parametrize("missing", ["eventName", "dynamodb"])
def test_a_record_missing_a_required_part_does_not_validate(missing: str) -> None:
    record = raw()
    del record[missing]

    with pytest.raises(UnreadableRecordError):
        StreamRecord.parse(record)


@pytest.mark.parametrize("record", [None, [], "INSERT", 7], ids=["null", "list", "string", "number"])
def test_a_record_that_is_not_an_object_does_not_validate(record: object) -> None:
    with pytest.raises(UnreadableRecordError):
        StreamRecord.parse(record)


def test_a_new_image_that_is_not_an_object_does_not_validate() -> None:
    with pytest.raises(UnreadableRecordError):
        StreamRecord.parse(with_image(["type", "job"]))


def test_a_record_is_immutable() -> None:
    record = StreamRecord.parse(raw())

    with pytest.raises(FrozenInstanceError):
        record.event_name = "MODIFY"  # type: ignore[misc]
