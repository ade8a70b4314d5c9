"""Ownership is tenant + sub: anyone else sees a 404 (never a 403), an empty list, a refused cursor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.support.answers import (
    QUIET_METRICS,
    SUMMARIZE,
    Answer,
    accepted,
    assert_problem,
    call_status,
    call_submit,
    new_key,
)
from tests.support.events import api_event, job_event, submit_event
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = [pytest.mark.integration, QUIET_METRICS]

MISSING_JOB_ID = "00000000-0000-4000-8000-000000000000"
# Identity overrides of the sample events (owner A is the samples' own caller: tenant acme).
OTHER_SUB = {"sub": "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"}
SAME_SUB_OTHER_TENANT = {"tenant": "globex"}
SAME_SUB_PERSONAL_TENANT = {"tenant": None}
STRANGERS = {"another-sub": OTHER_SUB, "same-sub-another-tenant": SAME_SUB_OTHER_TENANT}
ALL_STRANGERS = {**STRANGERS, "same-sub-personal-tenant": SAME_SUB_PERSONAL_TENANT}


@pytest.fixture
def storage(resources: TestResources) -> Storage:
    return Storage(resources)


def _submit_as_owner(count: int = 1) -> list[str]:
    return [accepted(call_submit(submit_event(SUMMARIZE, key=new_key()))) for _ in range(count)]


def _without_correlation(answer: Answer) -> dict[str, Any]:
    body: dict[str, Any] = answer.body
    return {key: value for key, value in body.items() if key != "correlationId"}


@pytest.mark.parametrize("stranger", list(STRANGERS.values()), ids=list(STRANGERS))
@pytest.mark.parametrize("name", ["get_status", "get_result", "cancel"])
def test_another_callers_job_looks_exactly_like_a_missing_one(
    storage: Storage, stranger: dict[str, Any], name: str
) -> None:
    # Given owner A's job
    (job_id,) = _submit_as_owner()

    # When another caller reads it, asks for its result or cancels it, and asks for a missing id
    theirs = call_status(job_event(name, job_id, **stranger))
    missing = call_status(job_event(name, MISSING_JOB_ID, **stranger))

    # Then both are the same 404 (only the correlation id differs), and A's job is untouched
    assert_problem(theirs, 404, "job_not_found")
    assert_problem(missing, 404, "job_not_found")
    assert _without_correlation(theirs) == _without_correlation(missing)
    assert theirs.headers == missing.headers
    assert job_id not in theirs.raw_body
    assert call_status(job_event("get_status", job_id)).body["status"] == "Pending"


@pytest.mark.parametrize("stranger", list(ALL_STRANGERS.values()), ids=list(ALL_STRANGERS))
def test_another_callers_list_never_shows_the_owners_jobs(storage: Storage, stranger: dict[str, Any]) -> None:
    # Given owner A's jobs, and one job of the other caller
    owners = _submit_as_owner(3)
    theirs = accepted(call_submit(submit_event(SUMMARIZE, key=new_key(), **stranger)))

    # When the other caller lists its jobs
    answer = call_status(api_event("list", query={}, **stranger))

    # Then it sees only its own
    assert answer.status == 200
    assert [item["jobId"] for item in answer.body["items"]] == [theirs]
    assert not set(owners) & {item["jobId"] for item in answer.body["items"]}


@pytest.mark.parametrize("stranger", list(STRANGERS.values()), ids=list(STRANGERS))
def test_a_cursor_issued_to_one_caller_is_refused_to_another(
    storage: Storage, stranger: dict[str, Any]
) -> None:
    # Given a cursor issued to owner A
    _submit_as_owner(3)
    cursor = call_status(api_event("list", query={"limit": "1"})).body["nextCursor"]
    assert cursor is not None

    # When another caller presents it
    answer = call_status(api_event("list", query={"limit": "1", "cursor": cursor}, **stranger))

    # Then it is refused
    assert_problem(answer, 400, "invalid_cursor")


@pytest.mark.parametrize("other_filter", [{"status": "Succeeded"}, {}], ids=["another-status", "no-status"])
def test_a_cursor_is_bound_to_its_status_filter(storage: Storage, other_filter: dict[str, str]) -> None:
    # Given a cursor issued for status=Pending
    _submit_as_owner(3)
    cursor = call_status(api_event("list", query={"status": "Pending", "limit": "1"})).body["nextCursor"]
    assert cursor is not None
    assert call_status(api_event("list", query={"status": "Pending", "cursor": cursor})).status == 200

    # When it is presented with another filter
    answer = call_status(api_event("list", query={**other_filter, "cursor": cursor}))

    # Then it is refused
    assert_problem(answer, 400, "invalid_cursor")
