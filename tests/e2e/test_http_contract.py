"""The HTTP contract of DESIGN.md over real HTTP, with real Cognito tokens, on the local stack."""

from __future__ import annotations

import uuid

from tests.support.local_stack import RunningStack

SUMMARIZE = {"operation": "summarize", "input": {"text": "One sentence. Two sentences."}}


def _key() -> str:
    return f"e2e-{uuid.uuid4()}"


def test_submit_answers_202_with_location_retry_after_and_status_document(stack: RunningStack) -> None:
    token = stack.token("contract-alice", "acme")
    answer = stack.call("POST", "/v1/jobs", token=token, body=SUMMARIZE, headers={"Idempotency-Key": _key()})
    assert answer.status == 202
    job_id = answer.body["jobId"]
    assert answer.headers["location"] == f"/v1/jobs/{job_id}"
    assert int(answer.headers["retry-after"]) >= 1
    assert answer.body["status"] == "Pending"
    assert "idempotent-replayed" not in answer.headers


def test_replay_returns_the_same_job_and_conflict_on_other_body(stack: RunningStack) -> None:
    token, key = stack.token("contract-alice", "acme"), _key()
    first = stack.call("POST", "/v1/jobs", token=token, body=SUMMARIZE, headers={"Idempotency-Key": key})
    again = stack.call("POST", "/v1/jobs", token=token, body=SUMMARIZE, headers={"Idempotency-Key": f'"{key}"'})
    other = {"operation": "analyze", "input": {"text": "different"}}
    conflict = stack.call("POST", "/v1/jobs", token=token, body=other, headers={"Idempotency-Key": key})
    assert again.status == 202
    assert again.body["jobId"] == first.body["jobId"]
    assert again.headers["idempotent-replayed"] == "true"
    assert conflict.status == 409
    assert conflict.content_type == "application/problem+json"
    assert conflict.body["code"] == "idempotency_key_reused"


def test_the_job_succeeds_and_its_result_is_readable(stack: RunningStack) -> None:
    token = stack.token("contract-alice", "acme")
    job_id = stack.call("POST", "/v1/jobs", token=token, body=SUMMARIZE, headers={"Idempotency-Key": _key()}).body[
        "jobId"
    ]
    document = stack.wait_terminal(job_id, token)
    assert document["status"] == "Succeeded"
    status = stack.call("GET", f"/v1/jobs/{job_id}", token=token)
    assert status.status == 200
    assert "retry-after" not in status.headers
    result = stack.call("GET", f"/v1/jobs/{job_id}/result", token=token)
    assert result.status == 200
    assert set(result.body) == {"jobId", "operation", "output", "usage"}


def test_no_token_or_a_bad_token_is_api_gateways_plain_401(stack: RunningStack) -> None:
    token = stack.token("contract-alice", "acme")
    header, payload, signature = token.split(".")
    tampered = f"{header}.{payload}.{signature[:-4]}{'AAAA' if signature[-4:] != 'AAAA' else 'BBBB'}"
    for candidate in (None, "not-a-jwt", tampered):
        answer = stack.call("GET", "/v1/jobs", token=candidate)
        assert answer.status == 401
        assert answer.body == {"message": "Unauthorized"}
