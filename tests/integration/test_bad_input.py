"""Requests the functions refuse: each gets its documented problem, and nothing is written."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from shared.contract import MAX_BODY_BYTES, MAX_INPUT_TEXT_BYTES
from tests.support.answers import (
    QUIET_METRICS,
    SUMMARIZE,
    Answer,
    assert_problem,
    assert_retry_after,
    call_status,
    call_submit,
    new_key,
)
from tests.support.aws import create_resources
from tests.support.events import api_event, job_event, submit_event
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = [pytest.mark.integration, QUIET_METRICS]

SAMPLE_JOB_ID = "6f1c2b7e-4d3a-4e8f-9b1a-0c2d3e4f5a6b"
SECRET_TEXT = "SECRET-CLIENT-TEXT-42"


@dataclass(frozen=True)
class Refusal:
    """A request, and the problem the contract answers it with."""

    call: Callable[[dict[str, Any]], Answer]
    event: Callable[[], dict[str, Any]]
    status: int
    code: str
    invalid: str | None = None  # the field invalidParams must name


def _submit(body: Any = SUMMARIZE, **overrides: Any) -> Callable[[], dict[str, Any]]:
    overrides.setdefault("key", new_key())
    return lambda: submit_event(body, **overrides)


def _raw(raw_body: str, **overrides: Any) -> Callable[[], dict[str, Any]]:
    return _submit(None, raw_body=raw_body, **overrides)


def _with(**fields: Any) -> dict[str, Any]:
    """The sample request with top-level fields replaced."""
    return {**SUMMARIZE, **fields}


def _options(**options: Any) -> dict[str, Any]:
    return _with(options=options)


def _list(**query: str) -> Callable[[], dict[str, Any]]:
    return lambda: api_event("list", query=query)


def _job(name: str, job_id: str) -> Callable[[], dict[str, Any]]:
    return lambda: job_event(name, job_id)


def _text_of(size: int) -> str:
    return json.dumps(
        {"operation": "summarize", "input": {"text": "é" * (size // 2) + "x" * (size % 2)}},
        ensure_ascii=False,
    )


def _submit_refusal(
    status: int, code: str, body: Any = SUMMARIZE, invalid: str | None = None, **kw: Any
) -> Refusal:
    return Refusal(call_submit, _submit(body, **kw), status, code, invalid)


ACCESS_TOKEN_CLAIMS = {
    "sub": "3b7c1d2e-8f4a-4c6b-9d1e-2f3a4b5c6d7e",
    "token_use": "access",
    "scope": "openid",
}

REFUSALS: dict[str, Refusal] = {
    # Idempotency-Key
    "missing-key": _submit_refusal(400, "missing_idempotency_key", key=None),
    "key-256-chars": _submit_refusal(400, "invalid_idempotency_key", key="k" * 256),
    "key-with-space": _submit_refusal(400, "invalid_idempotency_key", key="order 1"),
    "key-non-ascii": _submit_refusal(400, "invalid_idempotency_key", key="clé-1"),
    "key-control-char": _submit_refusal(400, "invalid_idempotency_key", key="order\x011"),
    "key-only-quotes": _submit_refusal(400, "invalid_idempotency_key", key='""'),
    # The body: JSON, schema, nulls, rules
    "invalid-json": Refusal(call_submit, _raw('{"operation": "summarize",'), 400, "invalid_json"),
    "json-not-an-object": _submit_refusal(400, "invalid_request", body=["summarize"]),
    "unknown-top-level-field": _submit_refusal(400, "invalid_request", _with(priority=1), "priority"),
    "unknown-input-field": _submit_refusal(
        400, "invalid_request", _with(input={"text": "t", "lang": "en"}), "input.lang"
    ),
    "unknown-option": _submit_refusal(400, "invalid_request", _options(temperature=1), "options.temperature"),
    "snake-case-option": _submit_refusal(
        400, "invalid_request", _options(max_output_tokens=5), "options.max_output_tokens"
    ),
    "missing-operation": _submit_refusal(400, "invalid_request", {"input": {"text": "t"}}, "operation"),
    "operation-not-a-string": _submit_refusal(400, "invalid_request", _with(operation=5), "operation"),
    "input-not-an-object": _submit_refusal(400, "invalid_request", _with(input="text"), "input"),
    "text-not-a-string": _submit_refusal(400, "invalid_request", _with(input={"text": 5}), "input.text"),
    "empty-text": _submit_refusal(400, "invalid_request", _with(input={"text": ""}), "input.text"),
    "tokens-as-string": _submit_refusal(
        400, "invalid_request", _options(maxOutputTokens="256"), "options.maxOutputTokens"
    ),
    "tokens-as-bool": _submit_refusal(
        400, "invalid_request", _options(maxOutputTokens=True), "options.maxOutputTokens"
    ),
    "tokens-as-float": _submit_refusal(
        400, "invalid_request", _options(maxOutputTokens=5.0), "options.maxOutputTokens"
    ),
    "tokens-zero": _submit_refusal(
        400, "invalid_request", _options(maxOutputTokens=0), "options.maxOutputTokens"
    ),
    "tokens-over-4096": _submit_refusal(
        400, "invalid_request", _options(maxOutputTokens=4097), "options.maxOutputTokens"
    ),
    "null-options": _submit_refusal(400, "invalid_request", _with(options=None)),
    "null-text": _submit_refusal(400, "invalid_request", _with(input={"text": None})),
    "null-model": _submit_refusal(400, "invalid_request", _options(model=None)),
    "unknown-operation": _submit_refusal(400, "invalid_request", _with(operation="translate"), "operation"),
    "operation-wrong-case": _submit_refusal(
        400, "invalid_request", _with(operation="Summarize"), "operation"
    ),
    "classify-without-labels": _submit_refusal(400, "invalid_request", _with(operation="classify")),
    "classify-empty-labels": _submit_refusal(
        400, "invalid_request", {**_options(labels=[]), "operation": "classify"}, "options.labels"
    ),
    "classify-blank-label": _submit_refusal(
        400, "invalid_request", {**_options(labels=["  "]), "operation": "classify"}
    ),
    "classify-duplicate-labels": _submit_refusal(
        400, "invalid_request", {**_options(labels=["a", "a"]), "operation": "classify"}
    ),
    "classify-51-labels": _submit_refusal(
        400, "invalid_request", {**_options(labels=[f"l{n}" for n in range(51)]), "operation": "classify"}
    ),
    "labels-on-summarize": _submit_refusal(400, "invalid_request", _options(labels=["a"])),
    "model-not-allowed": _submit_refusal(400, "model_not_allowed", _options(model="gpt-4o")),
    # Sizes and media type
    "text-one-byte-over": Refusal(
        call_submit, _raw(_text_of(MAX_INPUT_TEXT_BYTES + 1)), 413, "input_too_large"
    ),
    "body-over-1.5-mib": Refusal(
        call_submit,
        _raw(json.dumps({"operation": "summarize", "input": {"text": "x" * MAX_BODY_BYTES}})),
        413,
        "request_too_large",
    ),
    "text-plain": _submit_refusal(415, "unsupported_media_type", headers={"content-type": "text/plain"}),
    # Identity
    "no-claims": _submit_refusal(401, "unauthorized", claims={}),
    "null-claims": _submit_refusal(401, "unauthorized", claims=None),
    "access-token": _submit_refusal(401, "unauthorized", claims=dict(ACCESS_TOKEN_CLAIMS)),
    "sub-missing": _submit_refusal(401, "unauthorized", claims={"token_use": "id", "custom:tenant": "acme"}),
    "sub-malformed": _submit_refusal(401, "unauthorized", sub="alice smith"),
    "sub-too-long": _submit_refusal(401, "unauthorized", sub="s" * 129),
    "tenant-personal-prefix": _submit_refusal(401, "unauthorized", tenant="user:x"),
    "tenant-malformed": _submit_refusal(401, "unauthorized", tenant="acme/eu"),
    "list-with-access-token": Refusal(
        call_status,
        lambda: api_event("list", query={}, claims=dict(ACCESS_TOKEN_CLAIMS)),
        401,
        "unauthorized",
    ),
    "status-without-claims": Refusal(
        call_status, lambda: job_event("get_status", SAMPLE_JOB_ID, claims={}), 401, "unauthorized"
    ),
    # Without an ID token, the 401 comes first: nothing about the request is checked, or told
    "access-token-bad-body": _submit_refusal(
        401, "unauthorized", _with(operation="translate"), claims=dict(ACCESS_TOKEN_CLAIMS)
    ),
    "access-token-no-key": _submit_refusal(401, "unauthorized", key=None, claims=dict(ACCESS_TOKEN_CLAIMS)),
    "access-token-not-json": _submit_refusal(
        401, "unauthorized", headers={"content-type": "text/plain"}, claims=dict(ACCESS_TOKEN_CLAIMS)
    ),
    "no-claims-body-over-1.5-mib": Refusal(
        call_submit,
        _raw(json.dumps({"operation": "summarize", "input": {"text": "x" * MAX_BODY_BYTES}}), claims={}),
        401,
        "unauthorized",
    ),
    "access-token-not-a-uuid": Refusal(
        call_status,
        lambda: job_event("get_status", "not-a-uuid", claims=dict(ACCESS_TOKEN_CLAIMS)),
        401,
        "unauthorized",
    ),
    "access-token-bad-limit": Refusal(
        call_status,
        lambda: api_event("list", query={"limit": "0"}, claims=dict(ACCESS_TOKEN_CLAIMS)),
        401,
        "unauthorized",
    ),
    # Job ids
    "status-not-a-uuid": Refusal(call_status, _job("get_status", "not-a-uuid"), 400, "invalid_job_id"),
    "status-uuid-without-dashes": Refusal(
        call_status, _job("get_status", SAMPLE_JOB_ID.replace("-", "")), 400, "invalid_job_id"
    ),
    "result-not-a-uuid": Refusal(call_status, _job("get_result", "12345"), 400, "invalid_job_id"),
    "cancel-not-a-uuid": Refusal(call_status, _job("cancel", SAMPLE_JOB_ID + "0"), 400, "invalid_job_id"),
    # List parameters
    "status-wrong-case": Refusal(call_status, _list(status="pending"), 400, "invalid_status"),
    "status-unknown": Refusal(call_status, _list(status="Bogus"), 400, "invalid_status"),
    "limit-zero": Refusal(call_status, _list(limit="0"), 400, "invalid_limit"),
    "limit-101": Refusal(call_status, _list(limit="101"), 400, "invalid_limit"),
    "limit-not-a-number": Refusal(call_status, _list(limit="abc"), 400, "invalid_limit"),
    "limit-negative": Refusal(call_status, _list(limit="-1"), 400, "invalid_limit"),
    "cursor-garbage": Refusal(call_status, _list(cursor="garbage"), 400, "invalid_cursor"),
    "cursor-forged": Refusal(
        call_status, _list(cursor="eyJ2IjoxLCJrIjoiYSIsImoiOiJiIn0.AAAA"), 400, "invalid_cursor"
    ),
    "cursor-too-long": Refusal(call_status, _list(cursor="a" * 2000), 400, "invalid_cursor"),
    # Routes
    "unknown-route": Refusal(
        call_status, lambda: api_event("list", path="/v1/nope", query={}), 404, "route_not_found"
    ),
    "unversioned-route": Refusal(
        call_status, lambda: api_event("get_status", path=f"/jobs/{SAMPLE_JOB_ID}"), 404, "route_not_found"
    ),
}


@pytest.fixture
def storage(resources: TestResources) -> Storage:
    return Storage(resources)


@pytest.fixture(scope="module")
def shared_storage(moto_endpoint: str) -> Iterator[Storage]:
    """One set of resources for all refusals: none may write, and each checks that it wrote nothing."""
    created = create_resources(moto_endpoint)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
        for name, value in created.environment().items():
            patch.setenv(name, value)
        yield Storage(created)


@pytest.mark.parametrize("case", list(REFUSALS.values()), ids=list(REFUSALS))
def test_a_bad_request_gets_its_problem_and_writes_nothing(shared_storage: Storage, case: Refusal) -> None:
    # Given a bad request
    before = shared_storage.snapshot()
    event = case.event()

    # When it is sent
    answer = case.call(event)

    # Then it gets the documented problem, naming the bad field where there is one, and nothing changes
    body = assert_problem(answer, case.status, case.code)
    if case.invalid is not None:
        assert case.invalid in {param["name"] for param in body["invalidParams"]}, body
    assert shared_storage.snapshot() == before


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/xml", "multipart/form-data", "application/x-www-form-urlencoded"],
)
def test_a_body_that_is_not_json_is_unsupported(storage: Storage, content_type: str) -> None:
    # Given a JSON body whose content type says it is something else
    body = {"operation": "summarize", "input": {"text": SECRET_TEXT}}
    event = submit_event(body, key=new_key(), headers={"content-type": content_type})

    # When it is submitted
    answer = call_submit(event)

    # Then it is a 415 (never a 500 or a schema error), the text is not echoed back, and nothing is written
    assert_problem(answer, 415, "unsupported_media_type")
    assert SECRET_TEXT not in answer.raw_body
    assert storage.snapshot().jobs_table == frozenset()


def test_over_the_submit_rate_is_429_with_retry_after(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a limit of two submits per minute per owner
    monkeypatch.setenv("SUBMITS_PER_MINUTE", "2")

    # When one owner submits three times within one minute (a fresh owner if the minute turns meanwhile)
    for attempt in range(3):
        sub = f"rate-limited-{attempt}"
        jobs_before = len(storage.job_ids())
        minute = datetime.now(UTC).replace(second=0, microsecond=0)
        answers = [call_submit(submit_event(SUMMARIZE, key=new_key(), sub=sub)) for _ in range(3)]
        if datetime.now(UTC).replace(second=0, microsecond=0) == minute:
            break

    # Then the first two are accepted and the third is refused with a Retry-After within the minute
    assert [answer.status for answer in answers[:2]] == [202, 202]
    assert_problem(answers[2], 429, "rate_limited")
    assert 1 <= assert_retry_after(answers[2]) <= 60
    # (jobs of an earlier owner, when the minute turned, do not count)
    assert len(storage.job_ids()) - jobs_before == 2
