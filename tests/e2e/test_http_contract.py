"""The HTTP contract of DESIGN.md over real HTTP, with real Cognito tokens, on the local stack.

Every status code of the contract table, route by route, with the documented headers and
bodies. The 429 of the submit rate is shown on a stack with a small rate
(test_local_settings.py): at the default 60 a minute it would take 61 submits here.
"""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.support.local_stack import (
    Answer,
    RunningStack,
    assert_problem,
    assert_retry_after,
    assert_status_document,
    assert_unchanged,
    new_key,
    request_hash,
    unique,
)

SUMMARIZE = {"operation": "summarize", "input": {"text": "One sentence. Two sentences."}}
MAX_TEXT_BYTES = 1_048_576
MAX_BODY_BYTES = 1_572_864


def _key() -> str:
    return f"e2e-{uuid.uuid4()}"


def _summarize(text: str) -> dict[str, Any]:
    return {"operation": "summarize", "input": {"text": text}}


def _slow(seconds: int) -> dict[str, Any]:
    """A job the local model answers only after `seconds` (unique text: fresh fault counters)."""
    return _summarize(f"{unique('slow')}. [[delay:{seconds}]]")


# --- POST /v1/jobs ------------------------------------------------------------------------------


def test_submit_answers_202_with_location_retry_after_and_status_document(stack: RunningStack) -> None:
    token = stack.token("contract-alice", "acme")
    answer = stack.call("POST", "/v1/jobs", token=token, body=SUMMARIZE, headers={"Idempotency-Key": _key()})
    assert answer.status == 202
    job_id = answer.body["jobId"]
    assert answer.headers["location"] == f"/v1/jobs/{job_id}"
    assert int(answer.headers["retry-after"]) >= 1
    assert answer.body["status"] == "Pending"
    assert "idempotent-replayed" not in answer.headers


def test_the_submit_answer_is_a_complete_status_document_readable_at_once(stack: RunningStack) -> None:
    token = stack.token(unique("contract-doc"))
    answer = stack.submit(token, SUMMARIZE, headers={"Content-Type": "application/json; charset=utf-8"})
    assert answer.status == 202
    assert answer.content_type == "application/json"
    assert_retry_after(answer)
    document = answer.body
    assert_status_document(document)
    assert document["operation"] == "summarize"
    assert document["attempts"] == 0
    assert document["createdAt"] == document["updatedAt"]
    created = datetime.fromisoformat(document["createdAt"])
    assert datetime.fromisoformat(document["expiresAt"]) - created == timedelta(days=30)
    assert (document["cancelRequestedAt"], document["resultUrl"], document["error"], document["usage"]) == (
        None,
        None,
        None,
        None,
    )
    # Single-job reads are strongly consistent: no stale 404 right after the 202.
    read = stack.call("GET", answer.headers["location"], token=token)
    assert read.status == 200
    assert read.body["jobId"] == document["jobId"]
    assert read.body["createdAt"] == document["createdAt"]


def test_replay_returns_the_same_job_and_conflict_on_other_body(stack: RunningStack) -> None:
    token, key = stack.token("contract-alice", "acme"), _key()
    first = stack.call("POST", "/v1/jobs", token=token, body=SUMMARIZE, headers={"Idempotency-Key": key})
    again = stack.call(
        "POST", "/v1/jobs", token=token, body=SUMMARIZE, headers={"Idempotency-Key": f'"{key}"'}
    )
    other = {"operation": "analyze", "input": {"text": "different"}}
    conflict = stack.call("POST", "/v1/jobs", token=token, body=other, headers={"Idempotency-Key": key})
    assert again.status == 202
    assert again.body["jobId"] == first.body["jobId"]
    assert again.headers["idempotent-replayed"] == "true"
    assert conflict.status == 409
    assert conflict.content_type == "application/problem+json"
    assert conflict.body["code"] == "idempotency_key_reused"
    assert_problem(conflict, 409, "idempotency_key_reused")


def test_a_replay_makes_no_new_job_and_no_second_model_call(stack: RunningStack) -> None:
    token, key = stack.token(unique("contract-replay")), new_key()
    text = f"{unique('replay')}. Said once."
    first = stack.submit(token, _summarize(text), key)
    document = stack.wait_terminal(first.body["jobId"], token)
    # The same fields in another order and spacing: the same canonical fingerprint.
    reordered = f'{{ "input" : {{"text": {json.dumps(text)}}},  "operation":"summarize" }}'.encode()
    again = stack.call("POST", "/v1/jobs", token=token, raw_body=reordered, headers={"Idempotency-Key": key})
    assert again.status == 202
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["location"] == first.headers["location"]
    assert_retry_after(again)
    assert_unchanged(again.body, document)  # where the job stands now: Succeeded
    listed = stack.call("GET", "/v1/jobs", token=token).body
    assert [item["jobId"] for item in listed["items"]] == [first.body["jobId"]]
    assert len(stack.model_calls(request_hash("summarize", text), at_least=1)) == 1


def test_concurrent_identical_submits_get_the_same_job_never_409(stack: RunningStack) -> None:
    token, key, body = stack.token(unique("contract-race")), new_key(), _summarize(unique("race"))
    answers: list[Answer] = []
    lock = threading.Lock()

    def submit() -> None:
        answer = stack.submit(token, body, key)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=submit) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a.status for a in answers] == [202] * 4, [a.raw for a in answers]
    assert len({a.body["jobId"] for a in answers}) == 1
    assert sum(1 for a in answers if "idempotent-replayed" not in a.headers) <= 1
    listed = stack.call("GET", "/v1/jobs", token=token).body["items"]
    assert [item["jobId"] for item in listed] == [answers[0].body["jobId"]]


def test_an_idempotency_key_of_255_characters_is_accepted_with_or_without_quotes(stack: RunningStack) -> None:
    token, key = stack.token(unique("contract-longkey")), "k" * 223 + uuid.uuid4().hex
    assert len(key) == 255
    first = stack.submit(token, SUMMARIZE, key)
    quoted = stack.submit(token, SUMMARIZE, f'"{key}"')
    assert (first.status, quoted.status) == (202, 202)
    assert quoted.body["jobId"] == first.body["jobId"]
    assert quoted.headers["idempotent-replayed"] == "true"


LABELS = {"labels": ["billing", "support"]}


def _options(options: dict[str, Any]) -> bytes:
    return json.dumps({**SUMMARIZE, "options": options}).encode()


def _classify(labels: list[str]) -> bytes:
    return json.dumps(
        {"operation": "classify", "input": {"text": "x"}, "options": {"labels": labels}}
    ).encode()


INVALID_SUBMITS: list[tuple[str, dict[str, str] | None, bytes, str]] = [
    # (case, Idempotency-Key header (None: absent), body, code)
    ("missing key", None, json.dumps(SUMMARIZE).encode(), "missing_idempotency_key"),
    (
        "key with a space",
        {"Idempotency-Key": "a b"},
        json.dumps(SUMMARIZE).encode(),
        "invalid_idempotency_key",
    ),
    (
        "key of 256 chars",
        {"Idempotency-Key": "k" * 256},
        json.dumps(SUMMARIZE).encode(),
        "invalid_idempotency_key",
    ),
    (
        "key of empty quotes",
        {"Idempotency-Key": '""'},
        json.dumps(SUMMARIZE).encode(),
        "invalid_idempotency_key",
    ),
    ("bad JSON", {}, b'{"operation": "summarize", ', "invalid_json"),
    ("not an object", {}, b"[1, 2]", "invalid_request"),
    ("unknown top-level field", {}, json.dumps({**SUMMARIZE, "priority": 1}).encode(), "invalid_request"),
    (
        "unknown nested field",
        {},
        json.dumps({"operation": "summarize", "input": {"text": "x", "lang": "en"}}).encode(),
        "invalid_request",
    ),
    ("explicit null options", {}, json.dumps({**SUMMARIZE, "options": None}).encode(), "invalid_request"),
    (
        "explicit null model",
        {},
        json.dumps({**SUMMARIZE, "options": {"model": None}}).encode(),
        "invalid_request",
    ),
    (
        "text of wrong type",
        {},
        json.dumps({"operation": "summarize", "input": {"text": 5}}).encode(),
        "invalid_request",
    ),
    (
        "maxOutputTokens as a string",
        {},
        json.dumps({**SUMMARIZE, "options": {"maxOutputTokens": "5"}}).encode(),
        "invalid_request",
    ),
    (
        "maxOutputTokens 0",
        {},
        json.dumps({**SUMMARIZE, "options": {"maxOutputTokens": 0}}).encode(),
        "invalid_request",
    ),
    (
        "empty text",
        {},
        json.dumps({"operation": "summarize", "input": {"text": ""}}).encode(),
        "invalid_request",
    ),
    (
        "unknown operation",
        {},
        json.dumps({**SUMMARIZE, "operation": "translate"}).encode(),
        "invalid_request",
    ),
    (
        "model not allowed",
        {},
        json.dumps({**SUMMARIZE, "options": {"model": "gpt-5"}}).encode(),
        "model_not_allowed",
    ),
    (
        "classify without labels",
        {},
        json.dumps({**SUMMARIZE, "operation": "classify"}).encode(),
        "invalid_request",
    ),
    (
        "classify with an empty label",
        {},
        json.dumps({**SUMMARIZE, "operation": "classify", "options": {"labels": ["a", ""]}}).encode(),
        "invalid_request",
    ),
    ("labels for summarize", {}, json.dumps({**SUMMARIZE, "options": LABELS}).encode(), "invalid_request"),
    (
        "key of 258 chars",
        {"Idempotency-Key": "k" * 258},
        json.dumps(SUMMARIZE).encode(),
        "invalid_idempotency_key",
    ),
    (
        "explicit null input",
        {},
        json.dumps({"operation": "summarize", "input": None}).encode(),
        "invalid_request",
    ),
    ("maxOutputTokens 4097", {}, _options({"maxOutputTokens": 4097}), "invalid_request"),
    ("maxOutputTokens true", {}, _options({"maxOutputTokens": True}), "invalid_request"),
    ("duplicate labels", {}, _classify(["a", "a"]), "invalid_request"),
    ("51 labels", {}, _classify([f"label-{i}" for i in range(51)]), "invalid_request"),
    ("a blank label", {}, _classify(["a", "   "]), "invalid_request"),
]


@pytest.mark.parametrize(
    ("headers", "body", "code"), [c[1:] for c in INVALID_SUBMITS], ids=[c[0] for c in INVALID_SUBMITS]
)
def test_an_invalid_submit_is_400_problem_json(
    stack: RunningStack, headers: dict[str, str] | None, body: bytes, code: str
) -> None:
    token = stack.token(unique("contract-400"))
    sent = {"Idempotency-Key": new_key()} if headers == {} else headers
    answer = stack.call("POST", "/v1/jobs", token=token, raw_body=body, headers=sent)
    problem = assert_problem(answer, 400, code)
    if code == "invalid_request":
        # Which fields were wrong, never their values.
        assert problem["invalidParams"], problem
        assert all(set(p) == {"name", "reason"} for p in problem["invalidParams"]), problem
    # Nothing was accepted.
    assert stack.call("GET", "/v1/jobs", token=token).body["items"] == []


def test_an_access_token_passes_the_authorizer_but_the_function_answers_401(stack: RunningStack) -> None:
    user = unique("contract-access")
    stack.token(user)
    access = stack.sign_in(user)["AccessToken"]
    for method, path in (("GET", "/v1/jobs"), ("GET", f"/v1/jobs/{uuid.uuid4()}"), ("POST", "/v1/jobs")):
        headers = {"Idempotency-Key": new_key()} if method == "POST" else None
        answer = stack.call(
            method, path, token=access, body=SUMMARIZE if method == "POST" else None, headers=headers
        )
        assert_problem(answer, 401, "unauthorized")


def test_input_text_is_limited_to_1_mib_of_utf8(stack: RunningStack) -> None:
    token = stack.token(unique("contract-413"))
    at_limit = stack.submit(token, _summarize("a" * MAX_TEXT_BYTES))
    assert at_limit.status == 202, at_limit.raw[:300]
    over = stack.submit(token, _summarize("a" * (MAX_TEXT_BYTES + 1)))
    assert_problem(over, 413, "input_too_large")
    # Bytes, not characters: 349,526 euro signs are 1,048,578 UTF-8 bytes in a ~1 MiB body.
    euros = json.dumps(_summarize("\u20ac" * 349_526), ensure_ascii=False).encode()
    assert len(euros) < MAX_BODY_BYTES
    multibyte = stack.call(
        "POST", "/v1/jobs", token=token, raw_body=euros, headers={"Idempotency-Key": new_key()}
    )
    assert_problem(multibyte, 413, "input_too_large")
    items = stack.call("GET", "/v1/jobs", token=token).body["items"]
    assert [item["jobId"] for item in items] == [at_limit.body["jobId"]]
    # The 1 MiB input goes through storage and the worker like any other.
    assert stack.wait_terminal(at_limit.body["jobId"], token, timeout_seconds=120)["status"] == "Succeeded"


def test_a_body_over_1_5_mib_is_413_even_when_its_text_is_small(stack: RunningStack) -> None:
    token = stack.token(unique("contract-413"))
    # 300,000 characters written as \\u escapes: 1.8 MB of JSON for 300 KB of text.
    escaped = b'{"operation": "summarize", "input": {"text": "' + b"\\u0041" * 300_000 + b'"}}'
    assert len(escaped) > MAX_BODY_BYTES
    answer = stack.call(
        "POST", "/v1/jobs", token=token, raw_body=escaped, headers={"Idempotency-Key": new_key()}
    )
    assert_problem(answer, 413, "request_too_large")
    huge = stack.submit(token, _summarize("a" * MAX_BODY_BYTES))
    assert_problem(huge, 413, "request_too_large")


# --- GET /v1/jobs/{id} and .../result -----------------------------------------------------------


def test_status_has_retry_after_while_running_and_none_once_terminal(stack: RunningStack) -> None:
    token = stack.token(unique("contract-status"))
    job_id = stack.submit(token, _slow(3)).body["jobId"]
    pending = stack.call("GET", f"/v1/jobs/{job_id}", token=token)
    assert pending.status == 200
    assert pending.body["status"] in {"Pending", "Running"}
    assert_retry_after(pending)
    assert_status_document(pending.body, job_id)
    running = stack.wait_status(job_id, token, "Running")
    assert running["attempts"] == 1
    during = stack.call("GET", f"/v1/jobs/{job_id}", token=token)
    assert_retry_after(during)
    stack.wait_terminal(job_id, token)
    done = stack.call("GET", f"/v1/jobs/{job_id}", token=token)
    assert done.status == 200
    assert done.body["status"] == "Succeeded"
    assert "retry-after" not in done.headers
    assert_status_document(done.body, job_id)
    # An uppercase spelling of the id is the same UUID.
    upper = stack.call("GET", f"/v1/jobs/{job_id.upper()}", token=token)
    assert upper.status == 200
    assert upper.body["jobId"] == job_id


@pytest.mark.parametrize("suffix", ["", "/result"])
def test_a_job_id_that_is_not_a_uuid_is_400_and_a_missing_one_404(stack: RunningStack, suffix: str) -> None:
    token = stack.token(unique("contract-ids"))
    for bad in ("not-a-uuid", "1234", f"{uuid.uuid4()}x"):
        assert_problem(stack.call("GET", f"/v1/jobs/{bad}{suffix}", token=token), 400, "invalid_job_id")
    assert_problem(stack.call("GET", f"/v1/jobs/{uuid.uuid4()}{suffix}", token=token), 404, "job_not_found")


def test_the_result_is_409_until_succeeded_then_200(stack: RunningStack) -> None:
    token = stack.token(unique("contract-result"))
    job_id = stack.submit(token, _slow(2)).body["jobId"]
    early = stack.call("GET", f"/v1/jobs/{job_id}/result", token=token)
    assert_problem(early, 409, "job_not_succeeded")
    document = stack.wait_terminal(job_id, token)
    assert document["status"] == "Succeeded"
    result = stack.call("GET", document["resultUrl"], token=token)
    assert result.status == 200
    assert result.content_type == "application/json"
    assert set(result.body) == {"jobId", "operation", "output", "outputFormat", "usage"}
    assert result.body["jobId"] == job_id
    assert result.body["operation"] == "summarize"
    assert isinstance(result.body["output"], str)
    assert result.body["output"]
    assert result.body["outputFormat"] == "text"
    assert result.body["usage"] == document["usage"]
    assert document["usage"] is not None


def test_the_job_succeeds_and_its_result_is_readable(stack: RunningStack) -> None:
    token = stack.token("contract-alice", "acme")
    job_id = stack.call(
        "POST", "/v1/jobs", token=token, body=SUMMARIZE, headers={"Idempotency-Key": _key()}
    ).body["jobId"]
    document = stack.wait_terminal(job_id, token)
    assert document["status"] == "Succeeded"
    status = stack.call("GET", f"/v1/jobs/{job_id}", token=token)
    assert status.status == 200
    assert "retry-after" not in status.headers
    result = stack.call("GET", f"/v1/jobs/{job_id}/result", token=token)
    assert result.status == 200
    assert set(result.body) == {"jobId", "operation", "output", "outputFormat", "usage"}


# --- POST /v1/jobs/{id}/cancellation ---------------------------------------------------------------


def test_cancel_right_after_submit_answers_200_canceled_or_202_requested(stack: RunningStack) -> None:
    """Whether the worker has claimed the job yet is a race over HTTP: whichever way it went, the
    code and the document must agree (test_local_settings.py pins the Pending case down)."""
    token = stack.token(unique("contract-cancel"))
    job_id = stack.submit(token, _slow(2)).body["jobId"]
    answer = stack.call("POST", f"/v1/jobs/{job_id}/cancellation", token=token)
    assert answer.status in {200, 202}, answer.raw
    assert_status_document(answer.body, job_id)
    assert answer.body["cancelRequestedAt"] is not None
    if answer.status == 200:
        assert answer.body["status"] == "Canceled"
        assert "retry-after" not in answer.headers
    else:
        assert answer.body["status"] == "CancellationRequested"
        assert_retry_after(answer)
    assert stack.wait_terminal(job_id, token)["status"] == "Canceled"
    again = stack.call("POST", f"/v1/jobs/{job_id}/cancellation", token=token)
    assert again.status == 200
    assert again.body["status"] == "Canceled"
    assert "retry-after" not in again.headers


def test_cancel_of_a_succeeded_or_failed_job_is_409_and_changes_nothing(stack: RunningStack) -> None:
    token = stack.token(unique("contract-cancel"))
    succeeded = stack.submit(token, _summarize(unique("done"))).body["jobId"]
    failed = stack.submit(token, _summarize(f"{unique('fails')} [[fault:content_policy]]")).body["jobId"]
    for job_id, status in ((succeeded, "Succeeded"), (failed, "Failed")):
        before = stack.wait_terminal(job_id, token)
        assert before["status"] == status
        answer = stack.call("POST", f"/v1/jobs/{job_id}/cancellation", token=token)
        assert_problem(answer, 409, "job_not_cancelable")
        assert_unchanged(stack.call("GET", f"/v1/jobs/{job_id}", token=token).body, before)


def test_cancel_of_a_bad_or_missing_id_is_400_or_404(stack: RunningStack) -> None:
    token = stack.token(unique("contract-cancel"))
    assert_problem(stack.call("POST", "/v1/jobs/nope/cancellation", token=token), 400, "invalid_job_id")
    missing = stack.call("POST", f"/v1/jobs/{uuid.uuid4()}/cancellation", token=token)
    assert_problem(missing, 404, "job_not_found")


# --- GET /v1/jobs -----------------------------------------------------------------------------


def _all_pages(stack: RunningStack, token: str, query: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(50):
        suffix = f"&cursor={cursor}" if cursor else ""
        page = stack.call("GET", f"/v1/jobs?{query}{suffix}", token=token)
        assert page.status == 200, page.raw
        assert set(page.body) == {"items", "nextCursor"}
        items += page.body["items"]
        cursor = page.body["nextCursor"]
        if cursor is None:
            return items
    raise AssertionError("the cursor never ended")


def test_the_list_is_newest_first_paginated_and_filtered(stack: RunningStack) -> None:
    token = stack.token(unique("contract-list"))
    bodies = [
        _summarize(unique("ok")),
        _summarize(f"{unique('bad')} [[fault:context_length]]"),
        _summarize(unique("ok")),
        _summarize(f"{unique('bad')} [[fault:context_length]]"),
        _summarize(unique("ok")),
    ]
    submitted = [stack.submit(token, body).body["jobId"] for body in bodies]
    newest_first = list(reversed(submitted))
    for job_id in submitted:
        stack.wait_terminal(job_id, token)

    everything = _all_pages(stack, token, "limit=2")
    assert [item["jobId"] for item in everything] == newest_first
    for item in everything:
        assert_status_document(item)
    first = stack.call("GET", "/v1/jobs?limit=2", token=token).body
    assert len(first["items"]) <= 2
    assert first["nextCursor"]
    default = stack.call("GET", "/v1/jobs", token=token).body
    assert [item["jobId"] for item in default["items"]] == newest_first
    assert default["nextCursor"] is None

    failed = _all_pages(stack, token, "status=Failed&limit=1")
    assert [item["jobId"] for item in failed] == [submitted[3], submitted[1]]
    assert {item["status"] for item in failed} == {"Failed"}
    succeeded = _all_pages(stack, token, "status=Succeeded&limit=100")
    assert [item["jobId"] for item in succeeded] == [submitted[4], submitted[2], submitted[0]]
    assert _all_pages(stack, token, "status=CancellationRequested") == []


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("status=pending", "invalid_status"),
        ("status=Done", "invalid_status"),
        ("status=", "invalid_status"),
        ("limit=0", "invalid_limit"),
        ("limit=101", "invalid_limit"),
        ("limit=ten", "invalid_limit"),
        ("limit=-1", "invalid_limit"),
        ("cursor=abc", "invalid_cursor"),
        ("cursor=eyJ2IjoxfQ.AAAA", "invalid_cursor"),
    ],
)
def test_a_bad_list_query_is_400(stack: RunningStack, query: str, code: str) -> None:
    token = stack.token(unique("contract-list-400"))
    assert_problem(stack.call("GET", f"/v1/jobs?{query}", token=token), 400, code)


def test_a_cursor_is_bound_to_its_status_filter(stack: RunningStack) -> None:
    token = stack.token(unique("contract-cursor"))
    for _ in range(2):
        stack.submit(token, SUMMARIZE)
    cursor = stack.call("GET", "/v1/jobs?limit=1", token=token).body["nextCursor"]
    assert cursor
    assert stack.call("GET", f"/v1/jobs?limit=1&cursor={cursor}", token=token).status == 200
    other_filter = stack.call("GET", f"/v1/jobs?limit=1&status=Pending&cursor={cursor}", token=token)
    assert_problem(other_filter, 400, "invalid_cursor")
    tampered = ("f" if cursor[0] != "f" else "e") + cursor[1:]  # another position, same MAC
    assert_problem(
        stack.call("GET", f"/v1/jobs?limit=1&cursor={tampered}", token=token), 400, "invalid_cursor"
    )


# --- API Gateway's own answers and CORS ----------------------------------------------------------


def test_no_token_or_a_bad_token_is_api_gateways_plain_401(stack: RunningStack) -> None:
    token = stack.token("contract-alice", "acme")
    header, payload, signature = token.split(".")
    tampered = f"{header}.{payload}.{signature[:-4]}{'AAAA' if signature[-4:] != 'AAAA' else 'BBBB'}"
    for candidate in (None, "not-a-jwt", tampered):
        answer = stack.call("GET", "/v1/jobs", token=candidate)
        assert answer.status == 401
        assert answer.body == {"message": "Unauthorized"}


def test_cors_allows_the_idempotency_key_and_exposes_the_polling_headers(stack: RunningStack) -> None:
    origin = {"Origin": stack.console_origin}
    preflight = stack.call(
        "OPTIONS",
        "/v1/jobs",
        headers={
            **origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type,idempotency-key",
        },
    )
    assert preflight.status == 204
    assert preflight.headers["access-control-allow-origin"] == stack.console_origin
    allowed = {h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")}
    assert "idempotency-key" in allowed
    token = stack.token(unique("contract-cors"))
    answer = stack.submit(token, SUMMARIZE, headers=origin)
    assert answer.status == 202
    exposed = {h.strip().lower() for h in answer.headers["access-control-expose-headers"].split(",")}
    assert {"location", "retry-after", "idempotent-replayed"} <= exposed


def test_cors_allows_the_console_origin_only(stack: RunningStack) -> None:
    for other in ("https://app.example.com", "http://127.0.0.1:1"):
        preflight = stack.call(
            "OPTIONS",
            "/v1/realtime/tickets",
            headers={"Origin": other, "Access-Control-Request-Method": "POST"},
        )
        assert "access-control-allow-origin" not in preflight.headers
        answer = stack.call(
            "GET", "/v1/jobs", token=stack.token(unique("contract-cors")), headers={"Origin": other}
        )
        assert "access-control-allow-origin" not in answer.headers
