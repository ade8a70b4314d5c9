"""Request events for the handlers: the samples in events/, with the parts a test changes."""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

from shared import resources as r
from shared.adapters.dynamo_items import job_to_item
from shared.adapters.dynamodb_output import event_item
from shared.job import JobRecord
from shared.output import OutputEvent

EVENTS_DIR = Path(__file__).resolve().parents[2] / "events"
_MISSING = object()


def load_event(name: str) -> dict[str, Any]:
    """A fresh copy of events/<name>.json."""
    event: dict[str, Any] = json.loads((EVENTS_DIR / f"{name}.json").read_text())
    return event


def api_event(
    name: str,
    *,
    path: str | None = None,
    body: Any = _MISSING,
    raw_body: str | None = None,
    headers: dict[str, str | None] | None = None,
    query: dict[str, str] | None = None,
    claims: dict[str, Any] | object | None = _MISSING,
    sub: str | None = None,
    tenant: str | object | None = _MISSING,
) -> dict[str, Any]:
    """An API Gateway HTTP API (v2) event from a sample, with overrides.

    `body` is JSON-encoded; `raw_body` is sent as is. A header set to None is removed.
    `sub`/`tenant` change the sample's claims (tenant=None removes custom:tenant).
    """
    event = copy.deepcopy(load_event(name))
    event["requestContext"]["requestId"] = f"req-{uuid.uuid4().hex[:12]}"
    if path is not None:
        event["rawPath"] = path
        event["requestContext"]["http"]["path"] = path
    if body is not _MISSING:
        event["body"] = json.dumps(body)
    if raw_body is not None:
        event["body"] = raw_body
    for key, value in (headers or {}).items():
        if value is None:
            event["headers"].pop(key.lower(), None)
        else:
            event["headers"][key.lower()] = value
    if query is not None:
        event["queryStringParameters"] = query or None
        event["rawQueryString"] = "&".join(f"{k}={v}" for k, v in query.items())
    _apply_identity(event["requestContext"]["authorizer"]["jwt"], claims, sub, tenant)
    return event


def _apply_identity(jwt: dict[str, Any], claims: object, sub: str | None, tenant: object) -> None:
    if claims is not _MISSING:
        jwt["claims"] = claims
    if sub is not None:
        jwt["claims"]["sub"] = sub
    if tenant is None:
        jwt["claims"].pop("custom:tenant", None)
    elif tenant is not _MISSING:
        jwt["claims"]["custom:tenant"] = tenant


def submit_event(body: Any, key: str | None = "key-1", **overrides: Any) -> dict[str, Any]:
    """A submit request with a body and an Idempotency-Key (None leaves the header out)."""
    headers = dict(overrides.pop("headers", {}) or {})
    headers.setdefault("idempotency-key", key)
    return api_event("submit", body=body, headers=headers, **overrides)


def job_event(name: str, job_id: str, **overrides: Any) -> dict[str, Any]:
    """A status/result/cancel request for a job id."""
    suffix = {"get_status": "", "get_result": "/result", "get_output": "/output", "cancel": "/cancellation"}[
        name
    ]
    return api_event(name, path=f"/v1/jobs/{job_id}{suffix}", **overrides)


def job_stream_record(
    job: JobRecord, sequence: int, kind: str = "claim", event_name: str = "MODIFY"
) -> dict[str, Any]:
    """A jobs table stream record, as Lambda hands it to the notifier: the job as the adapter
    writes it, with the write kind (`w`) the writer recorded."""
    image = job_to_item(job, sweep_at=None)
    image[r.WRITE_KIND_ATTRIBUTE] = {"S": kind}
    return {
        "eventID": f"e{sequence}",
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/jobs/stream/2030-01-01T00:00:00.000",
        "dynamodb": {
            "Keys": {r.PARTITION_KEY: image[r.PARTITION_KEY], r.SORT_KEY: image[r.SORT_KEY]},
            "NewImage": image,
            "SequenceNumber": f"{sequence:021d}",
            "SizeBytes": 100,
            "StreamViewType": "NEW_IMAGE",
        },
    }


def output_event_record(event: OutputEvent, sequence: int, event_name: str = "INSERT") -> dict[str, Any]:
    """An output events table stream record, as Lambda hands it to the output pusher."""
    image = event_item(event, datetime(2030, 1, 16, tzinfo=UTC))
    keys = {r.OUTPUT_EVENTS_PARTITION_KEY, r.OUTPUT_EVENTS_SORT_KEY}
    return {
        "eventID": f"o{sequence}",
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/events/stream/2030-01-01T00:00:00",
        "dynamodb": {
            "Keys": {key: value for key, value in image.items() if key in keys},
            "NewImage": image,
            "SequenceNumber": f"{sequence:021d}",
            "SizeBytes": 100,
            "StreamViewType": "NEW_IMAGE",
        },
    }


def s3_object_created(
    bucket: str, key: str, size: int, etag: str, event_name: str = "ObjectCreated:Post"
) -> str:
    """An S3 notification body for one object written, as S3 sends it to a queue: the key encoded
    the way S3 encodes it (`quote_plus`, `/` included)."""
    notification = load_event("s3_object_created")
    record = notification["Records"][0]
    record["eventName"] = event_name
    record["s3"]["bucket"]["name"] = bucket
    record["s3"]["bucket"]["arn"] = f"arn:aws:s3:::{bucket}"
    record["s3"]["object"].update({"key": quote_plus(key, safe=""), "size": size, "eTag": etag.strip('"')})
    return json.dumps(notification)


def s3_test_event(bucket: str) -> str:
    """The notification S3 sends once when a bucket's notification to the queue is set up."""
    return json.dumps({**load_event("s3_test_event"), "Bucket": bucket})


def sqs_batch(*bodies: str) -> dict[str, Any]:
    """An SQS event source batch, one record per body, each with its own message id."""
    template = load_event("ingest_batch")["Records"][0]
    records = [{**copy.deepcopy(template), "messageId": str(uuid.uuid4()), "body": body} for body in bodies]
    return {"Records": records}
