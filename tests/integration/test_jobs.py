"""Status, result, cancel and list through the status function's handler, against moto."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from shared import resources as r
from shared.job import BlobLocation, JobError, JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.observability import logger
from shared.ports import Transition
from tests.support import jobs
from tests.support.answers import (
    QUIET_METRICS,
    SUMMARIZE,
    Answer,
    accepted,
    assert_problem,
    assert_retry_after,
    assert_status_document,
    call_status,
    call_submit,
    new_key,
)
from tests.support.events import api_event, job_event, submit_event
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = [pytest.mark.integration, QUIET_METRICS]
# What a usage document says of a job whose calls recorded no cached tokens and no tier (written
# straight by these tests, not by a worker).
NO_CACHE = {"cachedInputTokens": 0, "tiers": []}


@pytest.fixture
def storage(resources: TestResources) -> Storage:
    return Storage(resources)


def _submit() -> str:
    return accepted(call_submit(submit_event(SUMMARIZE, key=new_key())))


def _running(storage: Storage, job_id: str) -> JobRecord:
    return jobs.claim(storage.repository(), job_id)


def _succeeded(storage: Storage, job_id: str, location: BlobLocation = "item") -> JobRecord:
    running = _running(storage, job_id)
    usage = Usage(input_tokens=120, output_tokens=30)
    return jobs.succeed(
        storage.repository(),
        storage.payloads(),
        running,
        output="A short summary.",
        usage=usage,
        location=location,
    )


def _cancel_requested(storage: Storage, job_id: str) -> None:
    _running(storage, job_id)
    now = jobs.now_millis()
    storage.repository().transition(
        Transition(job_id, JobStatus.RUNNING, JobStatus.CANCELLATION_REQUESTED, now, cancel_requested_at=now)
    )


def _list(**query: str) -> Answer:
    return call_status(api_event("list", query=query))


def _list_everything(limit: int, status: str | None = None) -> tuple[list[str], int]:
    """Every job id the list returns, following nextCursor; and the number of pages read."""
    seen: list[str] = []
    query = {"limit": str(limit)} | ({"status": status} if status else {})
    for pages in range(1, 100):
        answer = _list(**query)
        assert answer.status == 200, answer.raw_body
        assert len(answer.body["items"]) <= limit
        seen.extend(item["jobId"] for item in answer.body["items"])
        cursor = answer.body["nextCursor"]
        if cursor is None:
            return seen, pages
        query["cursor"] = cursor
    raise AssertionError("the list never ended")


# --- Status ------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["Pending", "Running", "CancellationRequested"])
def test_a_job_in_progress_says_when_to_poll_again(storage: Storage, state: str) -> None:
    # Given a job that is not terminal
    job_id = _submit()
    if state == "Running":
        _running(storage, job_id)
    elif state == "CancellationRequested":
        _cancel_requested(storage, job_id)

    # When its status is read
    answer = call_status(job_event("get_status", job_id))

    # Then it is 200 with the status document and a Retry-After
    assert answer.status == 200
    assert answer.header("Content-Type") == "application/json"
    assert_status_document(answer.body, state)
    assert assert_retry_after(answer) >= 1
    assert answer.body["attempts"] == (0 if state == "Pending" else 1)


def test_a_succeeded_job_has_a_result_url_and_no_retry_after(storage: Storage) -> None:
    # Given a job the worker finished
    job_id = _submit()
    _succeeded(storage, job_id)

    # When its status is read
    answer = call_status(job_event("get_status", job_id))

    # Then polling is over: no Retry-After, a result URL, the usage
    assert answer.status == 200
    assert answer.header("Retry-After") is None
    assert_status_document(answer.body, "Succeeded")
    assert answer.body["resultUrl"] == f"/v1/jobs/{job_id}/result"
    assert answer.body["usage"] == {"inputTokens": 120, "outputTokens": 30, "estimated": False, **NO_CACHE}
    assert answer.body["attempts"] == 1


def test_a_failed_job_shows_its_error_and_usage(storage: Storage) -> None:
    # Given a job that failed after a model call reported usage
    job_id = _submit()
    running = _running(storage, job_id)
    error = JobError(
        code="content_policy", message="The provider declined the input under its content policy."
    )
    jobs.fail(storage.repository(), running, error, Usage(input_tokens=50, output_tokens=0))

    # When its status is read
    answer = call_status(job_event("get_status", job_id))

    # Then it is terminal, with the error and the usage, and no result URL
    assert answer.status == 200
    assert answer.header("Retry-After") is None
    assert_status_document(answer.body, "Failed")
    assert answer.body["error"] == {"code": error.code, "message": error.message}
    assert answer.body["usage"] == {"inputTokens": 50, "outputTokens": 0, "estimated": False, **NO_CACHE}


def test_a_job_id_is_matched_in_any_case(storage: Storage) -> None:
    # Given a job
    job_id = _submit()

    # When its id is sent in upper case
    answer = call_status(job_event("get_status", job_id.upper()))

    # Then it is the same job, named in lower case
    assert answer.status == 200
    assert answer.body["jobId"] == job_id


# --- Result ------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["Pending", "Running"])
def test_a_job_without_a_result_is_409(storage: Storage, state: str) -> None:
    # Given a job that has not succeeded
    job_id = _submit()
    if state == "Running":
        _running(storage, job_id)

    # When its result is asked for
    answer = call_status(job_event("get_result", job_id))

    # Then it is 409 job_not_succeeded
    assert_problem(answer, 409, "job_not_succeeded")


@pytest.mark.parametrize("location", ["item", "s3"])
def test_a_succeeded_job_has_its_result(storage: Storage, location: BlobLocation) -> None:
    # Given a job that succeeded, its output stored beside it or in S3
    job_id = _submit()
    _succeeded(storage, job_id, location)

    # When its result is read
    answer = call_status(job_event("get_result", job_id))

    # Then it is the output and the usage, nothing else
    assert answer.status == 200
    assert answer.header("Content-Type") == "application/json"
    assert answer.body == {
        "jobId": job_id,
        "operation": "summarize",
        "output": "A short summary.",
        "outputFormat": "text",
        "usage": {"inputTokens": 120, "outputTokens": 30, "estimated": False, **NO_CACHE},
    }


class _Lines(logging.Handler):
    """The function's log lines as Powertools formats them (with their appended keys)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(logger.registered_formatter.format(record)))


def test_a_problems_correlation_id_is_in_the_log_line_of_its_request(storage: Storage) -> None:
    # Given a succeeded job whose result item went missing
    job_id = _submit()
    _succeeded(storage, job_id)
    key = {r.PARTITION_KEY: {"S": f"JOB#{job_id}"}, r.SORT_KEY: {"S": "RESULT"}}
    storage.dynamodb.delete_item(TableName=storage.resources.jobs_table, Key=key)

    # When its result is read (the function logs an error)
    lines, underlying = _Lines(), logging.getLogger(logger.service)
    underlying.addHandler(lines)
    try:
        answer = call_status(job_event("get_result", job_id))
    finally:
        underlying.removeHandler(lines)

    # Then the caller gets a 503, with when to retry, whose correlationId finds the error line,
    # which is the job's too
    problem = assert_problem(answer, 503, "service_unavailable")
    assert answer.header("Retry-After") == "2"
    [error] = [line for line in lines.lines if line["level"] == "ERROR"]
    assert error["request_id"] == problem["correlationId"] == answer.request_id
    assert (error["correlation_id"], error["job_id"]) == (job_id, job_id)


# --- Cancel ------------------------------------------------------------------------------------


def test_canceling_a_pending_job_ends_it_and_repeating_is_harmless(storage: Storage) -> None:
    # Given a Pending job
    job_id = _submit()

    # When it is canceled, twice
    first = call_status(job_event("cancel", job_id))
    second = call_status(job_event("cancel", job_id))

    # Then both answers are 200 Canceled, terminal (no Retry-After), with one cancel time
    for answer in (first, second):
        assert answer.status == 200
        assert answer.header("Retry-After") is None
        assert_status_document(answer.body, "Canceled")
    assert first.body["cancelRequestedAt"] is not None
    assert second.body == first.body
    assert call_status(job_event("get_status", job_id)).body == first.body


def test_canceling_a_running_job_asks_the_worker_to_stop(storage: Storage) -> None:
    # Given a Running job
    job_id = _submit()
    running = _running(storage, job_id)

    # When it is canceled, twice
    first = call_status(job_event("cancel", job_id))
    second = call_status(job_event("cancel", job_id))

    # Then both are 202 CancellationRequested with a Retry-After; the worker keeps its lease
    for answer in (first, second):
        assert answer.status == 202
        assert_retry_after(answer)
        assert_status_document(answer.body, "CancellationRequested")
    assert second.body == first.body
    stored = storage.repository().get_job(job_id)
    assert stored is not None
    assert stored.lease_token == running.lease_token


def test_canceling_a_succeeded_job_is_409(storage: Storage) -> None:
    # Given a job that succeeded
    job_id = _submit()
    _succeeded(storage, job_id)

    # When it is canceled
    answer = call_status(job_event("cancel", job_id))

    # Then it is 409 and the job is unchanged
    assert_problem(answer, 409, "job_not_cancelable")
    assert call_status(job_event("get_status", job_id)).body["status"] == "Succeeded"


def test_canceling_a_failed_job_is_409(storage: Storage) -> None:
    # Given a job that failed
    job_id = _submit()
    running = _running(storage, job_id)
    jobs.fail(storage.repository(), running, JobError(code="invalid_input", message="Rejected."))

    # When it is canceled
    answer = call_status(job_event("cancel", job_id))

    # Then it is 409
    assert_problem(answer, 409, "job_not_cancelable")


# --- Expired jobs --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["get_status", "get_result", "cancel"])
def test_an_expired_job_is_gone(storage: Storage, name: str) -> None:
    # Given a job of the caller whose expiry passed (TTL deletes late, so the item is still there)
    now = jobs.now_millis()
    expired = jobs.create(
        storage.repository(),
        jobs.new_job(created_at=now - timedelta(days=31), expires_at=now - timedelta(seconds=1)),
    )

    # When it is read, its result asked for, or canceled
    answer = call_status(job_event(name, expired.job_id))

    # Then it is 404 as if it never existed, and it is not listed
    assert_problem(answer, 404, "job_not_found")
    assert _list().body["items"] == []
    stored = storage.repository().get_job(expired.job_id)
    assert stored is not None
    assert stored.status is JobStatus.PENDING


def test_a_missing_job_is_404(storage: Storage) -> None:
    # Given no job with this id
    # When it is read
    answer = call_status(job_event("get_status", "00000000-0000-4000-8000-000000000000"))

    # Then it is 404 job_not_found
    assert_problem(answer, 404, "job_not_found")


# --- List --------------------------------------------------------------------------------------


def test_the_list_is_newest_first(storage: Storage) -> None:
    # Given jobs submitted one after another (some in the same millisecond, most likely)
    submitted = [_submit() for _ in range(5)]

    # When the caller lists its jobs
    answer = _list()

    # Then they come newest first, each as a status document, with no further page
    assert answer.status == 200
    assert answer.header("Content-Type") == "application/json"
    assert [item["jobId"] for item in answer.body["items"]] == submitted[::-1]
    for item in answer.body["items"]:
        assert_status_document(item, "Pending")
    assert answer.body["nextCursor"] is None


def test_the_list_items_are_the_status_documents(storage: Storage) -> None:
    # Given a job that succeeded
    job_id = _submit()
    _succeeded(storage, job_id)

    # When the list is read
    (item,) = _list().body["items"]

    # Then the item is what the status route answers, revision included: the list reads the job
    # itself (the index holds only what never changes)
    single = call_status(job_event("get_status", job_id)).body
    assert item == single
    assert single["revision"] > 1


def test_pages_reach_every_job_exactly_once(storage: Storage) -> None:
    # Given seven jobs
    submitted = [_submit() for _ in range(7)]

    # When the list is read three at a time, following nextCursor
    seen, pages = _list_everything(limit=3)

    # Then every job comes once, newest first, over at least three pages
    assert seen == submitted[::-1]
    assert pages >= 3


def test_the_status_filter_holds_across_pages(storage: Storage) -> None:
    # Given six jobs, three of them canceled
    submitted = [_submit() for _ in range(6)]
    canceled = submitted[1::2]
    for job_id in canceled:
        assert call_status(job_event("cancel", job_id)).status == 200

    # When Canceled jobs are listed two at a time, and Pending ones at once
    seen_canceled, _ = _list_everything(limit=2, status="Canceled")
    pending = _list(status="Pending").body["items"]

    # Then each filter returns exactly its jobs, newest first
    assert seen_canceled == canceled[::-1]
    assert [item["jobId"] for item in pending] == [j for j in submitted[::-1] if j not in canceled]
    assert {item["status"] for item in pending} == {"Pending"}


def test_the_default_page_is_twenty(storage: Storage) -> None:
    # Given twenty-one jobs, written straight to the table
    repository = storage.repository()
    now = jobs.now_millis()
    created = [
        jobs.create(repository, jobs.new_job(created_at=now - timedelta(seconds=n))) for n in range(21)
    ]

    # When the list is read without a limit
    answer = _list()

    # Then it holds the twenty newest and a cursor to the last one
    body: dict[str, Any] = answer.body
    assert [item["jobId"] for item in body["items"]] == [job.job_id for job in created[:20]]
    assert body["nextCursor"] is not None
    rest = _list(cursor=body["nextCursor"]).body
    assert [item["jobId"] for item in rest["items"]] == [created[20].job_id]
