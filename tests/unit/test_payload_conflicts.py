"""Large payloads in S3: a conditional PUT that loses to an existing object is fine; one that
raced a concurrent write waits for it to settle, and only one that never settles is a 503."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from shared.adapters.payloads import DynamoS3PayloadStore
from shared.errors import StorageUnavailableError
from shared.job import JobInput

JOB_ID = "0b7f4a4e-5d1c-4f5e-9a51-3f1f6b7f2c11"
EXPIRES = datetime(2030, 1, 1, tzinfo=UTC)


def _store_with_s3_answers(*answers: tuple[str, int]) -> tuple[DynamoS3PayloadStore, Stubber]:
    credentials: dict[str, Any] = {"aws_access_key_id": "unit", "aws_secret_access_key": "unit"}
    s3 = boto3.client("s3", region_name="us-east-1", **credentials)
    dynamodb = boto3.client("dynamodb", region_name="us-east-1", **credentials)
    stubber = Stubber(s3)
    for code, status in answers:
        stubber.add_client_error("put_object", service_error_code=code, http_status_code=status)
    stubber.activate()
    return DynamoS3PayloadStore(dynamodb, lambda: s3, "jobs", "payloads"), stubber


def test_an_object_that_already_exists_is_left_as_it_is() -> None:
    store, stubber = _store_with_s3_answers(("PreconditionFailed", 412))

    store.put_input(JobInput(job_id=JOB_ID, text="large"), "s3", EXPIRES)

    stubber.assert_no_pending_responses()


def test_a_conditional_write_racing_another_waits_for_it_and_finds_it_written() -> None:
    """Concurrent identical submits of a large input: S3 answers 409 while the other PUT is in
    flight; the retry then sees it written (412), and the submit goes on, never a 503."""
    store, stubber = _store_with_s3_answers(("ConditionalRequestConflict", 409), ("PreconditionFailed", 412))

    store.put_input(JobInput(job_id=JOB_ID, text="large"), "s3", EXPIRES)

    stubber.assert_no_pending_responses()


def test_a_conflict_that_never_settles_is_retryable() -> None:
    conflicts = [("ConditionalRequestConflict", 409)] * 6
    store, stubber = _store_with_s3_answers(*conflicts)

    with pytest.raises(StorageUnavailableError):
        store.put_input(JobInput(job_id=JOB_ID, text="large"), "s3", EXPIRES)
    stubber.assert_no_pending_responses()
