"""parse_job_message: a queue body is one of ours (job id + trace id) or it is poison (None)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.adapters.sqs_queue import encode_message
from shared.messages import parse_job_message
from shared.ports import JobMessage

JOB_ID = "3f2b8c1e-9d4a-4e6b-8a7c-1b2d3e4f5a6b"
TRACE = "1-67a1b2c3-abcdef0123456789abcdef01"


def body(**fields: Any) -> str:
    return json.dumps({"jobId": JOB_ID, "traceId": TRACE} | fields)


def test_a_valid_body_is_parsed() -> None:
    assert parse_job_message(body()) == JobMessage(job_id=JOB_ID, trace_id=TRACE)


def test_what_the_queue_adapter_sends_parses_back() -> None:
    message = JobMessage(job_id=JOB_ID, trace_id=TRACE)

    assert parse_job_message(encode_message(message)) == message


def test_an_uppercase_job_id_is_normalized_to_lowercase() -> None:
    assert parse_job_message(body(jobId=JOB_ID.upper())) == JobMessage(job_id=JOB_ID, trace_id=TRACE)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("not json", id="not-json"),
        pytest.param("[1, 2]", id="a-list"),
        pytest.param('"a string"', id="a-string"),
        pytest.param("null", id="null"),
        pytest.param('{"jobId": "' + JOB_ID + '"', id="truncated"),
        pytest.param(body(extra="field"), id="extra-field"),
        pytest.param(json.dumps({"jobId": JOB_ID}), id="no-trace-id"),
        pytest.param(json.dumps({"traceId": TRACE}), id="no-job-id"),
        pytest.param(body(jobId=123), id="job-id-a-number"),
        pytest.param(body(traceId=123), id="trace-id-a-number"),
        pytest.param(body(jobId=None), id="job-id-null"),
        pytest.param(body(traceId=""), id="trace-id-empty"),
        pytest.param(body(traceId="t" * 129), id="trace-id-too-long"),
        pytest.param(body(jobId="not-a-uuid-but-exactly-36-characters"), id="job-id-36-chars-not-a-uuid"),
        pytest.param(body(jobId=JOB_ID.replace("-", "")), id="job-id-without-dashes"),
        pytest.param(body(jobId="{" + JOB_ID + "}"), id="job-id-in-braces"),
        pytest.param(body(jobId=JOB_ID + " "), id="job-id-trailing-space"),
        pytest.param(body(jobId="g" + JOB_ID[1:]), id="job-id-not-hex"),
        pytest.param(json.dumps({"job_id": JOB_ID, "trace_id": TRACE}), id="snake-case-names"),
    ],
)
def test_anything_else_is_poison(text: str) -> None:
    assert parse_job_message(text) is None


def test_whitespace_around_the_body_is_still_read() -> None:
    # JSON allows whitespace around the value; the parser must not call that poison
    assert parse_job_message(f"  {body()}\n") == JobMessage(job_id=JOB_ID, trace_id=TRACE)
