"""Request events for the handlers: the samples in events/, with the parts a test changes."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

from shared import resources as r
from shared.adapters.dynamo_items import job_to_item
from shared.job import JobRecord

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
    suffix = {"get_status": "", "get_result": "/result", "cancel": "/cancellation"}[name]
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
