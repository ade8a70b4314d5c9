"""Idempotency-Key semantics of POST /v1/jobs: replays, reuse, races and crashes between the writes."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from functions.submit.settings import SubmitSettings
from shared import resources as r
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.payloads import DynamoS3PayloadStore
from tests.support.answers import (
    QUIET_METRICS,
    SUMMARIZE,
    SUMMARIZE_APART,
    accepted,
    assert_problem,
    call_status,
    call_submit,
)
from tests.support.containers import start_containers
from tests.support.events import job_event, submit_event
from tests.support.faults import INJECTED_FAULT_TEXT, fail_once
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = [pytest.mark.integration, QUIET_METRICS]

OTHER_BODY = {"operation": "analyze", "input": {"text": "Something else entirely."}}


@pytest.fixture
def storage(resources: TestResources) -> Storage:
    return Storage(resources)


def test_the_same_key_and_body_replay_the_same_job(storage: Storage) -> None:
    # Given a job accepted under a key
    first = call_submit(submit_event(SUMMARIZE, key="order-1"))
    job_id = accepted(first)

    # When the client retries with the same key and body
    again = call_submit(submit_event(SUMMARIZE, key="order-1"))

    # Then it gets the same job, marked as a replay, and nothing new is stored
    assert accepted(again) == job_id
    assert again.header("Idempotent-Replayed") == "true"
    assert again.header("Location") == f"/v1/jobs/{job_id}"
    assert again.body == first.body
    assert storage.job_ids() == [job_id]
    assert len(storage.idempotency_items()) == 1


def test_the_fingerprint_ignores_key_order_and_whitespace(storage: Storage) -> None:
    # Given a job accepted under a key
    job_id = accepted(call_submit(submit_event(SUMMARIZE, key="order-1")))

    # When the same request is sent again, serialized differently
    raw = json.dumps({"input": SUMMARIZE["input"], "operation": "summarize"}, indent=4)
    again = call_submit(submit_event(None, key="order-1", raw_body=raw))

    # Then it is the same request
    assert accepted(again) == job_id
    assert again.header("Idempotent-Replayed") == "true"


def test_a_replay_shows_where_the_job_stands_now(storage: Storage) -> None:
    # Given a job accepted, then canceled
    job_id = accepted(call_submit(submit_event(SUMMARIZE, key="order-1")))
    assert call_status(job_event("cancel", job_id)).status == 200

    # When the submit is retried
    again = call_submit(submit_event(SUMMARIZE, key="order-1"))

    # Then the replay describes the job as it is, not as it was
    assert accepted(again) == job_id
    assert again.body["status"] == "Canceled"
    assert storage.job_ids() == [job_id]


def test_a_replay_leaves_a_finished_jobs_input_to_expire(storage: Storage) -> None:
    # Given a job (its input stored apart) accepted, then canceled: its input now lives 24 h more,
    # not the job's 30 days
    job_id = accepted(call_submit(submit_event(SUMMARIZE_APART, key="order-1")))
    assert call_status(job_event("cancel", job_id)).status == 200
    expiry_after_cancel = (storage.item(job_id, "INPUT") or {})[r.TTL_ATTRIBUTE]

    # When the client retries the submit (DESIGN.md: steps 2-3 repeat *conditionally*)
    assert accepted(call_submit(submit_event(SUMMARIZE_APART, key="order-1"))) == job_id

    # Then the input's expiry is still the one the cancel set ("inputs 24 h after the job ends")
    assert (storage.item(job_id, "INPUT") or {})[r.TTL_ATTRIBUTE] == expiry_after_cancel


def test_the_same_key_with_another_body_is_refused(storage: Storage) -> None:
    # Given a job accepted under a key
    job_id = accepted(call_submit(submit_event(SUMMARIZE, key="order-1")))
    claims_before = storage.idempotency_items()

    # When the key is reused for a different request
    answer = call_submit(submit_event(OTHER_BODY, key="order-1"))

    # Then it is a 409, and neither a job nor a claim changes
    assert_problem(answer, 409, "idempotency_key_reused")
    assert "fingerprint" not in answer.raw_body
    assert storage.job_ids() == [job_id]
    assert storage.idempotency_items() == claims_before


def test_an_identical_retry_replays_after_a_deploy_narrowed_the_model_allowlist(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {**SUMMARIZE, "options": {"model": "gpt-4o"}}
    # Given a job accepted for a model the allowlist then allowed
    monkeypatch.setenv("ALLOWED_MODELS", "gpt-4o-mini,gpt-4o")
    job_id = accepted(call_submit(submit_event(body, key="order-1")))
    claims_before = storage.idempotency_items()

    # When a deploy drops that model and the client retries the same request
    monkeypatch.setenv("ALLOWED_MODELS", "gpt-4o-mini")
    again = call_submit(submit_event(body, key="order-1"))

    # Then it replays the job (server-side policy is not part of the request)
    assert accepted(again) == job_id
    assert again.header("Idempotent-Replayed") == "true"
    assert storage.job_ids() == [job_id]
    assert storage.idempotency_items() == claims_before
    # ... while a new key for that model is refused, and nothing is written for it
    assert_problem(call_submit(submit_event(body, key="order-2")), 400, "model_not_allowed")
    assert storage.job_ids() == [job_id]
    assert storage.idempotency_items() == claims_before


@pytest.mark.parametrize(
    ("first_key", "second_key"),
    [('"order-1"', "order-1"), ("order-1", '"order-1"')],
    ids=["quoted-first", "bare-first"],
)
def test_a_quoted_key_is_the_same_key(storage: Storage, first_key: str, second_key: str) -> None:
    # Given a job accepted under a key, quoted or not
    job_id = accepted(call_submit(submit_event(SUMMARIZE, key=first_key)))

    # When the other spelling of the same key is sent (the IETF draft sends it quoted)
    again = call_submit(submit_event(SUMMARIZE, key=second_key))

    # Then it is a replay of the same job
    assert accepted(again) == job_id
    assert again.header("Idempotent-Replayed") == "true"
    assert storage.job_ids() == [job_id]


def test_the_longest_key_is_accepted_quoted_or_not(storage: Storage) -> None:
    # Given a key of 255 visible ASCII characters
    key = "k" * 254 + "~"

    # When it is sent bare, then quoted
    first = call_submit(submit_event(SUMMARIZE, key=key))
    again = call_submit(submit_event(SUMMARIZE, key=f'"{key}"'))

    # Then both name the same job
    assert accepted(again) == accepted(first)


@pytest.mark.parametrize(
    "other_caller",
    [{"sub": "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"}, {"tenant": "globex"}, {"tenant": None}],
    ids=["another-sub", "same-sub-another-tenant", "same-sub-personal-tenant"],
)
def test_a_key_is_scoped_to_its_owner(storage: Storage, other_caller: dict[str, Any]) -> None:
    # Given a job accepted under a key
    job_id = accepted(call_submit(submit_event(SUMMARIZE, key="order-1")))

    # When another owner uses the same key, even with another body
    other = call_submit(submit_event(OTHER_BODY, key="order-1", **other_caller))

    # Then it gets an independent job, not a replay and not a 409
    other_id = accepted(other)
    assert other_id != job_id
    assert other.header("Idempotent-Replayed") is None
    assert storage.job_ids() == sorted([job_id, other_id])


def test_concurrent_identical_submits_get_one_job(storage: Storage) -> None:
    # Given twenty warm execution environments of the submit function
    containers = start_containers("functions.submit", 20, SubmitSettings)
    events = [submit_event(SUMMARIZE, key="race-1") for _ in containers]
    start = threading.Barrier(len(containers))

    def submit(index: int) -> dict[str, Any]:
        start.wait()
        return containers[index].invoke(events[index])

    # When they all submit the same request with the same key at once
    with ThreadPoolExecutor(max_workers=len(containers)) as pool:
        responses = list(pool.map(submit, range(len(containers))))

    # Then every caller gets 202 and the same job (none gets a 409), and one job exists
    assert {response["statusCode"] for response in responses} == {202}, responses
    job_ids = {json.loads(response["body"])["jobId"] for response in responses}
    assert len(job_ids) == 1
    assert storage.job_ids() == sorted(job_ids)
    assert len(storage.idempotency_items()) == 1


@pytest.mark.parametrize(
    ("owner", "method"),
    [(DynamoS3PayloadStore, "put_input"), (DynamoJobRepository, "create_job")],
    ids=["crash-before-the-input", "crash-before-the-job"],
)
def test_a_retry_completes_a_submit_that_crashed_between_writes(
    storage: Storage, monkeypatch: pytest.MonkeyPatch, owner: type, method: str
) -> None:
    # Given a submit (of an input stored apart) that crashes after its idempotency claim, before
    # the job exists
    calls = fail_once(monkeypatch, owner, method)
    crashed = call_submit(submit_event(SUMMARIZE_APART, key="order-1"))

    # Then the caller gets a 500 problem with no trace of the failure, and no job exists yet
    assert calls == [1]
    assert_problem(crashed, 500, "internal_error")
    assert INJECTED_FAULT_TEXT not in crashed.raw_body
    assert storage.job_ids() == []
    (claim,) = storage.idempotency_items()

    # When the client retries with the same key
    retried = call_submit(submit_event(SUMMARIZE_APART, key="order-1"))

    # Then the claimed job is completed: the same id, one job, its input in place
    job_id = accepted(retried)
    assert job_id == claim["jobId"]["S"]
    assert storage.job_ids() == [job_id]
    assert storage.payloads().get_input(job_id, "item") is not None
    assert call_status(job_event("get_status", job_id)).status == 200
