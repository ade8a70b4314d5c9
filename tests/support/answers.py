"""Calling the API functions' handlers the way Lambda does, and reading their answers against the contract."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from functions.status.handler import lambda_handler as status_handler
from functions.submit.handler import lambda_handler as submit_handler
from tests.support.lambda_context import FakeLambdaContext

# Powertools warns on every invocation that publishes no metric; the API functions publish none yet.
QUIET_METRICS = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")
PROBLEM_CONTENT_TYPE = "application/problem+json"
PROBLEM_FIELDS = {"type", "title", "status", "detail", "code", "correlationId"}
STATUS_DOCUMENT_FIELDS = {
    "jobId",
    "status",
    "operation",
    "createdAt",
    "updatedAt",
    "expiresAt",
    "attempts",
    "crashes",
    "revision",
    "progress",
    "cancelRequestedAt",
    "resultUrl",
    "error",
    "usage",
    "reservedTokens",
    "stream",
    "waitingFor",
}
STATUSES = {"Pending", "Running", "Succeeded", "Failed", "CancellationRequested", "Canceled"}
TERMINAL_STATUSES = {"Succeeded", "Failed", "Canceled"}
RFC3339_MILLIS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
DELTA_SECONDS = re.compile(r"^[1-9][0-9]*$")
# What leaks when an exception's text reaches a caller: class names, tracebacks, library names.
_RAW_ERROR_TEXT = re.compile(r"Traceback|\b\w*(Error|Exception)\b|botocore|boto3|pydantic|File \"")


@dataclass(frozen=True)
class Answer:
    """One handler response, with the request that produced it."""

    event: dict[str, Any]
    status: int
    headers: dict[str, str]
    raw_body: str

    @property
    def body(self) -> Any:
        """The body, parsed as JSON."""
        return json.loads(self.raw_body)

    @property
    def request_id(self) -> str:
        """API Gateway's request id: what a problem's correlationId must be."""
        return str(self.event["requestContext"]["requestId"])

    def header(self, name: str) -> str | None:
        """A response header, looked up case-insensitively as HTTP defines it."""
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


def _answer(event: dict[str, Any], response: dict[str, Any]) -> Answer:
    headers = {key: str(value) for key, value in (response.get("headers") or {}).items()}
    return Answer(event=event, status=response["statusCode"], headers=headers, raw_body=response["body"])


def call_submit(event: dict[str, Any]) -> Answer:
    """Invoke the submit function's Lambda handler."""
    return _answer(event, submit_handler(event, FakeLambdaContext()))


def call_status(event: dict[str, Any]) -> Answer:
    """Invoke the status function's Lambda handler (status, result, cancel and list)."""
    return _answer(event, status_handler(event, FakeLambdaContext()))


def assert_problem(answer: Answer, status: int, code: str) -> dict[str, Any]:
    """The answer is the RFC 9457 problem of the contract for this code; returns its body."""
    assert answer.status == status, answer.raw_body
    assert answer.header("Content-Type") == PROBLEM_CONTENT_TYPE
    body: dict[str, Any] = answer.body
    assert PROBLEM_FIELDS <= set(body) <= PROBLEM_FIELDS | {"invalidParams"}, body
    assert body["type"] == f"urn:outlast:problem:{code}"
    assert body["code"] == code
    assert body["status"] == status
    assert body["correlationId"] == answer.request_id
    assert body["title"]
    assert body["detail"]
    assert not _RAW_ERROR_TEXT.search(answer.raw_body), answer.raw_body
    return body


def assert_retry_after(answer: Answer) -> int:
    """Retry-After is delta-seconds, an integer >= 1 (never an HTTP date); returns it."""
    value = answer.header("Retry-After")
    assert value is not None, answer.headers
    assert DELTA_SECONDS.match(value), value
    return int(value)


def assert_job_id(job_id: str) -> None:
    """A job id is a lowercase UUIDv4."""
    assert job_id == job_id.lower()
    assert uuid.UUID(job_id).version == 4
    assert str(uuid.UUID(job_id)) == job_id


def assert_status_document(document: dict[str, Any], status: str | None = None) -> None:
    """The document has exactly the contract's fields, in the contract's formats."""
    assert set(document) == STATUS_DOCUMENT_FIELDS, document
    assert_job_id(document["jobId"])
    assert document["status"] in STATUSES
    if status is not None:
        assert document["status"] == status
    for name in ("createdAt", "updatedAt", "expiresAt"):
        assert RFC3339_MILLIS.match(document[name]), (name, document[name])
    if document["cancelRequestedAt"] is not None:
        assert RFC3339_MILLIS.match(document["cancelRequestedAt"])
    assert isinstance(document["attempts"], int)
    assert document["attempts"] >= 0
    expected_result_url = (
        f"/v1/jobs/{document['jobId']}/result" if document["status"] == "Succeeded" else None
    )
    assert document["resultUrl"] == expected_result_url


SUMMARIZE: dict[str, Any] = {"operation": "summarize", "input": {"text": "Outlast keeps LLM work alive."}}
# A text too long to ride in the job item (it gets an input item of its own), still far below the
# 8 KB at which inputs go to S3: for the tests of the separate input write.
APART_TEXT = "Outlast keeps LLM work alive, and this input is long enough to be stored apart. " * 8
SUMMARIZE_APART: dict[str, Any] = {"operation": "summarize", "input": {"text": APART_TEXT}}


def new_key() -> str:
    """A fresh Idempotency-Key."""
    return f"key-{uuid.uuid4().hex}"


def accepted(answer: Answer) -> str:
    """The answer is a 202 of a submit; returns the job id."""
    assert answer.status == 202, answer.raw_body
    job_id: str = answer.body["jobId"]
    return job_id
