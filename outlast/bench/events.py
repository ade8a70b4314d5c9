"""Invocation events and the Lambda context for in-process runs, built from events/*.json."""

from __future__ import annotations

import copy
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from outlast.local.synth import PROJECT_ROOT

EVENTS_DIR = PROJECT_ROOT / "events"
SAMPLE_TENANT = "acme"


def load_event(name: str) -> dict[str, Any]:
    """A fresh copy of events/<name>.json."""
    event: dict[str, Any] = json.loads((EVENTS_DIR / f"{name}.json").read_text())
    return event


def _with_identity(event: dict[str, Any], sub: str, tenant: str) -> dict[str, Any]:
    event["requestContext"]["requestId"] = f"bench-{uuid.uuid4().hex[:16]}"
    claims = event["requestContext"]["authorizer"]["jwt"]["claims"]
    claims["sub"], claims["custom:tenant"] = sub, tenant
    return event


def submit_event(body: dict[str, Any], key: str, sub: str, tenant: str = SAMPLE_TENANT) -> dict[str, Any]:
    """POST /v1/jobs from events/submit.json with this body, key and caller."""
    event = _with_identity(copy.deepcopy(load_event("submit")), sub, tenant)
    event["body"] = json.dumps(body)
    event["headers"]["idempotency-key"] = key
    return event


def status_event(job_id: str, sub: str, tenant: str = SAMPLE_TENANT) -> dict[str, Any]:
    """GET /v1/jobs/{id} from events/get_status.json for this job and caller."""
    event = _with_identity(copy.deepcopy(load_event("get_status")), sub, tenant)
    path = f"/v1/jobs/{job_id}"
    event["rawPath"] = path
    event["requestContext"]["http"]["path"] = path
    event["pathParameters"] = {"jobId": job_id}
    return event


@dataclass
class BenchContext:
    """The Lambda context fields Powertools and the worker read."""

    function_name: str = "outlast-bench"
    memory_limit_in_mb: int = 512
    timeout_seconds: float = 30.0
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:outlast-bench"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.monotonic)

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's timeout."""
        return max(0, int((self.timeout_seconds - (time.monotonic() - self.started)) * 1000))
