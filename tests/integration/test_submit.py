"""POST /v1/jobs through the submit function's handler, against moto."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from shared import resources as r
from shared.adapters.dynamo_items import INPUT_BODY_ATTRIBUTE
from shared.adapters.item_size import item_size
from shared.clock import from_iso
from shared.contract import MAX_INPUT_TEXT_BYTES
from tests.support.answers import (
    QUIET_METRICS,
    SUMMARIZE,
    SUMMARIZE_APART,
    accepted,
    assert_job_id,
    assert_retry_after,
    assert_status_document,
    call_status,
    call_submit,
    new_key,
)
from tests.support.events import job_event, load_event, submit_event
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = [pytest.mark.integration, QUIET_METRICS]

SAMPLE_CLAIMS = load_event("submit")["requestContext"]["authorizer"]["jwt"]["claims"]


@pytest.fixture
def storage(resources: TestResources) -> Storage:
    return Storage(resources)


def test_a_submit_is_accepted_with_the_status_document(storage: Storage) -> None:
    # Given a valid request with an Idempotency-Key
    event = submit_event(SUMMARIZE, key="order-1")

    # When it is submitted
    answer = call_submit(event)

    # Then it is accepted: a root-relative Location, a Retry-After, and the status document
    job_id = accepted(answer)
    assert_job_id(job_id)
    assert answer.header("Content-Type") == "application/json"
    assert answer.header("Location") == f"/v1/jobs/{job_id}"
    assert assert_retry_after(answer) >= 1
    assert answer.header("Idempotent-Replayed") is None
    document = answer.body
    assert_status_document(document, "Pending")
    assert document["attempts"] == 0
    assert document["operation"] == "summarize"
    assert document["createdAt"] == document["updatedAt"]
    assert from_iso(document["expiresAt"]) - from_iso(document["createdAt"]) == timedelta(days=30)
    assert (document["cancelRequestedAt"], document["error"], document["usage"]) == (None, None, None)


def test_a_submit_writes_the_claim_and_the_job_with_a_small_input_in_it(storage: Storage) -> None:
    # Given a valid request with a short text
    # When it is submitted
    job_id = accepted(call_submit(submit_event(SUMMARIZE, key="order-1")))

    # Then the idempotency claim and the job item exist, owned by the caller, the input inside
    claims = storage.idempotency_items()
    assert [claim["jobId"]["S"] for claim in claims] == [job_id]
    job = storage.item(job_id, "JOB")
    assert job is not None
    assert job["status"]["S"] == "Pending"
    assert job["ownerKey"]["S"] == f"{SAMPLE_CLAIMS['custom:tenant']}#{SAMPLE_CLAIMS['sub']}"
    assert job["inputLocation"]["S"] == "job"
    assert {r.SWEEP_INDEX_PARTITION, r.SWEEP_INDEX_SORT} <= set(job)
    assert item_size(job) < 1024
    assert storage.item(job_id, "INPUT") is None
    stored_input = storage.stored_input(job_id)
    assert stored_input is not None
    assert stored_input.text == SUMMARIZE["input"]["text"]
    assert storage.object_keys() == []


def test_a_longer_input_gets_an_item_of_its_own_beside_the_job(storage: Storage) -> None:
    job_id = accepted(call_submit(submit_event(SUMMARIZE_APART, key="order-1")))

    job = storage.item(job_id, "JOB")
    assert job is not None
    assert job["inputLocation"]["S"] == "item"
    assert INPUT_BODY_ATTRIBUTE not in job
    assert item_size(job) < 1024
    stored_input = storage.payloads().get_input(job_id, "item")
    assert stored_input is not None
    assert stored_input.text == SUMMARIZE_APART["input"]["text"]
    assert storage.object_keys() == []


def test_the_job_is_readable_right_after_the_202(storage: Storage) -> None:
    # Given a job just accepted
    submitted = call_submit(submit_event(SUMMARIZE, key="order-1"))
    job_id = accepted(submitted)

    # When its Location is read at once
    answer = call_status(job_event("get_status", job_id))

    # Then it is there (single-job reads are strongly consistent), as the 202 described it
    assert answer.status == 200
    assert answer.body == submitted.body


def test_options_reach_the_stored_input_and_the_job(storage: Storage) -> None:
    # Given a classify request with every option
    body = {
        "operation": "classify",
        "input": {"text": "The parcel arrived broken."},
        "options": {"model": "gpt-4o-mini", "maxOutputTokens": 64, "labels": ["complaint", "praise"]},
    }

    # When it is submitted
    job_id = accepted(call_submit(submit_event(body, key="classify-1")))

    # Then the input keeps the options that shape the prompt, and the job the model
    stored_input = storage.stored_input(job_id)
    assert stored_input is not None
    assert (stored_input.max_output_tokens, stored_input.labels) == (64, ("complaint", "praise"))
    job = storage.item(job_id, "JOB")
    assert job is not None
    assert (job["operation"]["S"], job["model"]["S"]) == ("classify", "gpt-4o-mini")


def test_a_caller_without_a_tenant_gets_a_personal_tenant(storage: Storage) -> None:
    # Given a token without custom:tenant
    event = submit_event(SUMMARIZE, key="personal-1", tenant=None)

    # When it submits
    job_id = accepted(call_submit(event))

    # Then the job belongs to the personal tenant user:{sub}
    job = storage.item(job_id, "JOB")
    assert job is not None
    assert job["ownerKey"]["S"] == f"user:{SAMPLE_CLAIMS['sub']}#{SAMPLE_CLAIMS['sub']}"


def test_a_large_input_goes_to_s3_and_the_job_stays_small(storage: Storage) -> None:
    # Given 100 KB of text
    text = "x" * 100_000
    body = {"operation": "summarize", "input": {"text": text}}

    # When it is submitted
    job_id = accepted(call_submit(submit_event(body, key="large-1")))

    # Then the input is one S3 object (no input item) and the job item stays under 1 KB
    assert storage.object_keys() == [f"{r.INPUT_PREFIX}{job_id}.json"]
    assert storage.item(job_id, "INPUT") is None
    job = storage.item(job_id, "JOB")
    assert job is not None
    assert job["inputLocation"]["S"] == "s3"
    assert item_size(job) < 1024
    stored_input = storage.payloads().get_input(job_id, "s3")
    assert stored_input is not None
    assert stored_input.text == text


def test_the_job_item_stays_under_1_kb_for_every_identity_the_api_accepts(storage: Storage) -> None:
    # Given the longest tenant and sub that shared/identity.py lets through (128 characters each)
    event = submit_event(SUMMARIZE, key="long-identity", sub="s" * 128, tenant="t" * 128)

    # When the caller submits
    job_id = accepted(call_submit(event))

    # Then the job item is still under 1 KB (DESIGN.md, "Cost discipline"), even before the
    # lease, cancel and error fields later transitions add
    job = storage.item(job_id, "JOB")
    assert job is not None
    assert item_size(job) < 1024, item_size(job)


def test_text_of_exactly_the_limit_is_accepted(storage: Storage) -> None:
    # Given text of exactly 1,048,576 UTF-8 bytes, in two-byte characters, sent unescaped
    text = "é" * (MAX_INPUT_TEXT_BYTES // 2)
    raw_body = json.dumps({"operation": "summarize", "input": {"text": text}}, ensure_ascii=False)

    # When it is submitted
    answer = call_submit(submit_event(None, key="limit-1", raw_body=raw_body))

    # Then it is accepted and stored whole
    job_id = accepted(answer)
    stored_input = storage.payloads().get_input(job_id, "s3")
    assert stored_input is not None
    assert stored_input.text == text


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", None])
def test_a_json_body_is_accepted_with_or_without_its_media_type(
    storage: Storage, content_type: str | None
) -> None:
    # Given a JSON body labelled as JSON (with or without parameters) or not labelled at all
    event = submit_event(SUMMARIZE, key=new_key(), headers={"content-type": content_type})

    # When it is submitted
    answer = call_submit(event)

    # Then it is accepted
    accepted(answer)


def test_a_json_media_type_is_recognised_in_any_case(storage: Storage) -> None:
    # Given a JSON body labelled "Application/JSON" (media types are case-insensitive, RFC 9110 8.3.1)
    event = submit_event(SUMMARIZE, key=new_key(), headers={"content-type": "Application/JSON"})

    # When it is submitted
    answer = call_submit(event)

    # Then it is accepted like any other JSON body
    accepted(answer)
    assert len(storage.job_ids()) == 1
