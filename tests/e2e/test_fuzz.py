"""API fuzzing, the short run: schemathesis against the committed OpenAPI document on the local
stack, every request with a real ID token. No 5xx, and every answer matches the document:
status, media type, headers and body. `make fuzz` is the long run (outlast/fuzz.py).

Generated submits rarely pass the cross-field rules (labels only for classify, the model
allowlist), so known requests along a job's life go through the same checks: every documented
success answers at least once.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from schemathesis import Case, Response

from outlast import fuzz
from tests.support.local_stack import RunningStack, new_key, unique

# Examples per operation in the fuzzing phase; the coverage phase adds its own deterministic
# cases (boundaries, missing and malformed parameters): about 200 requests in all.
EXAMPLES = 10

schema = fuzz.load_schema()


@pytest.fixture(scope="module")
def token(stack: RunningStack) -> str:
    """One fuzz user of its own: its jobs and submit budget are nobody else's."""
    return stack.token(unique("fuzz"), "fuzz")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_matches_the_document(case: Case[Any], stack: RunningStack, token: str) -> None:
    fuzz.freshen_idempotency_key(case)
    case.call_and_validate(base_url=stack.url, headers=fuzz.auth_headers(token), timeout=60)


# --- known requests, the same checks -------------------------------------------------------------


def _call(
    stack: RunningStack,
    route: str,
    token: str | None,
    *,
    job_id: str | None = None,
    query: dict[str, Any] | None = None,
    body: Any = None,
    key: str | None = None,
    raw: tuple[str, bytes] | None = None,
) -> Response:
    """One request to a documented operation ("POST /v1/jobs"), validated like a generated one;
    `raw` sends (content type, bytes) as the body, whatever the operation declares."""
    method, path = route.split(" ", 1)
    case = schema[path][method].Case(
        path_parameters={"job_id": job_id} if job_id else None,
        query=query,
        headers={fuzz.IDEMPOTENCY_KEY: key} if key else None,
        **({"body": body, "media_type": "application/json"} if body is not None else {}),
    )
    headers = fuzz.auth_headers(token) if token else {}
    if raw is None:
        return case.call_and_validate(base_url=stack.url, headers=headers, timeout=60)
    content_type, data = raw
    return case.call_and_validate(
        base_url=stack.url, headers={**headers, "Content-Type": content_type}, data=data, timeout=60
    )


def _summarize(text: str) -> dict[str, Any]:
    return {"operation": "summarize", "input": {"text": text}}


def test_a_job_life_answers_as_documented(stack: RunningStack) -> None:
    token = stack.token(unique("fuzz-known"), "fuzz")
    key, body = new_key(), _summarize(unique("Known text. It has sentences."))
    # Given a submitted job, its replay, and the key reused for another body
    accepted = _call(stack, "POST /v1/jobs", token, body=body, key=key)
    assert accepted.status_code == 202
    job_id = accepted.json()["jobId"]
    assert _call(stack, "POST /v1/jobs", token, body=body, key=key).status_code == 202
    assert _call(stack, "POST /v1/jobs", token, body=_summarize("other"), key=key).status_code == 409
    # When it is read before and after it succeeds
    assert _call(stack, "GET /v1/jobs/{job_id}", token, job_id=job_id).status_code == 200
    stack.wait_terminal(job_id, token)
    # Then status, result, a refused cancel and the list all answer as documented
    assert _call(stack, "GET /v1/jobs/{job_id}", token, job_id=job_id).status_code == 200
    assert _call(stack, "GET /v1/jobs/{job_id}/result", token, job_id=job_id).status_code == 200
    assert _call(stack, "POST /v1/jobs/{job_id}/cancellation", token, job_id=job_id).status_code == 409
    page = _call(stack, "GET /v1/jobs", token, query={"status": "Succeeded", "limit": 1})
    assert page.status_code == 200
    assert page.json()["items"]


def test_a_canceled_job_answers_as_documented(stack: RunningStack) -> None:
    token = stack.token(unique("fuzz-cancel"), "fuzz")
    classify = {
        "operation": "classify",
        "input": {"text": unique("Slow to classify. [[delay:3]]")},
        "options": {"labels": ["billing", "shipping"], "maxOutputTokens": 64},
    }
    job_id = _call(stack, "POST /v1/jobs", token, body=classify, key=new_key()).json()["jobId"]
    # Pending: 200 Canceled; Running: 202 CancellationRequested
    assert _call(stack, "POST /v1/jobs/{job_id}/cancellation", token, job_id=job_id).status_code in {200, 202}
    assert _call(stack, "GET /v1/jobs/{job_id}/result", token, job_id=job_id).status_code == 409
    assert _call(stack, "GET /v1/jobs", token, query={"limit": 100}).status_code == 200


# --- findings: requests that once broke the contract ---------------------------------------------

_JOB_ID = "0b5c7e52-9a9e-4c4e-8f0e-7d0c1c3f2a11"
_DIGITS = b'{"operation": "summarize", "input": {"text": "x"}, "options": {"maxOutputTokens": %s}}'


@pytest.mark.parametrize(
    ("route", "raw"),
    [
        # The fuzzer's find: bytes that are not UTF-8, sent as JSON (500 from the body decoder).
        pytest.param("POST /v1/jobs", ("application/json", b"\xc2\x00"), id="submit-body-not-utf8"),
        # Siblings of it, where json.loads raises something other than JSONDecodeError (500).
        pytest.param(
            "POST /v1/jobs", ("application/json", b"[" * 100_000 + b"]" * 100_000), id="submit-json-too-deep"
        ),
        pytest.param("POST /v1/jobs", ("application/json", _DIGITS % (b"9" * 5000)), id="submit-5000-digits"),
        # A body on a route that takes none: refused before routing with 415/413, not documented there.
        pytest.param("GET /v1/jobs", ("text/plain", b"abc"), id="list-with-text-body"),
        pytest.param(
            "POST /v1/jobs/{job_id}/cancellation", ("text/plain", b"abc"), id="cancel-with-text-body"
        ),
        pytest.param(
            "GET /v1/jobs/{job_id}/result",
            ("application/json", b"a" * 1_600_000),
            id="result-with-1.6MB-body",
        ),
    ],
)
def test_an_odd_body_answers_as_documented(
    stack: RunningStack, token: str, route: str, raw: tuple[str, bytes]
) -> None:
    job_id = _JOB_ID if "{job_id}" in route else None
    key = new_key() if route == "POST /v1/jobs" else None
    _call(stack, route, token, job_id=job_id, key=key, raw=raw)


def test_a_request_without_a_token_answers_as_documented(stack: RunningStack) -> None:
    # API Gateway's authorizer answers 401 {"message": "Unauthorized"} as application/json
    # (DESIGN.md); the document declares 401 as problem+json only.
    assert _call(stack, "GET /v1/jobs", None).status_code == 401
