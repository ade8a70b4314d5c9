"""S3 notifications as the ingest queue carries them: parsed, keys decoded, anything else poison."""

from __future__ import annotations

import json

import pytest

from functions.ingest.notifications import ObjectCreated, parse_notification
from shared.documents.record import Upload
from tests.support.events import load_event, s3_object_created, s3_test_event

KEY = "documents/user:ab12/ab12/6f1c2b9e-4d3a-4e8f-9a7b-1c2d3e4f5a6b/original"


def test_an_object_created_event_names_the_decoded_key_and_the_upload():
    body = s3_object_created("bucket-1", KEY, size=2048, etag='"0a1b2c"')

    notification = parse_notification(body)

    assert notification is not None
    assert notification.objects == (
        ObjectCreated(bucket="bucket-1", key=KEY, upload=Upload(etag="0a1b2c", bytes=2048)),
    )
    assert not notification.test_event


def test_the_sample_event_is_encoded_as_s3_encodes_keys():
    # The sample in events/ holds the key as S3 sends it: `/` and `:` percent-encoded
    notification = parse_notification(json.dumps(load_event("s3_object_created")))

    assert notification is not None
    assert notification.objects[0].key.startswith("documents/acme/")


def test_a_key_with_spaces_and_plus_signs_is_decoded_as_quote_plus_encodes_it():
    body = s3_object_created("b", "documents/a+b c/x", size=1, etag="e")

    notification = parse_notification(body)

    assert notification is not None
    assert notification.objects[0].key == "documents/a+b c/x"


def test_the_test_event_is_recognized_and_announces_nothing():
    notification = parse_notification(s3_test_event("bucket-1"))

    assert notification is not None
    assert (notification.test_event, notification.objects) == (True, ())


def test_events_other_than_object_created_announce_nothing():
    body = s3_object_created("b", KEY, size=1, etag="e", event_name="ObjectRemoved:Delete")

    notification = parse_notification(body)

    assert notification is not None
    assert notification.objects == ()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("not json", id="not-json"),
        pytest.param("{}", id="empty-object"),
        pytest.param('{"Records": []}', id="no-records"),
        pytest.param('{"jobId": "abc", "traceId": "t"}', id="a-job-message"),
        pytest.param('{"Event": "s3:Other"}', id="another-s3-event"),
    ],
)
def test_a_body_that_is_no_s3_notification_is_poison(body):
    assert parse_notification(body) is None


def test_an_object_created_record_without_an_etag_is_poison():
    notification = json.loads(s3_object_created("b", KEY, size=1, etag="e"))
    del notification["Records"][0]["s3"]["object"]["eTag"]

    assert parse_notification(json.dumps(notification)) is None


def test_a_record_from_another_source_is_poison():
    notification = json.loads(s3_object_created("b", KEY, size=1, etag="e"))
    notification["Records"][0]["eventSource"] = "aws:sqs"

    assert parse_notification(json.dumps(notification)) is None
