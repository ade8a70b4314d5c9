"""Who may see what, and which tokens pass: ownership is tenant + sub, and API Gateway's JWT
authorizer checks signature, issuer, audience and expiry before any function runs."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from tests.support.local_stack import (
    Answer,
    RunningStack,
    assert_api_gateway_401,
    assert_problem,
    forge_token,
    new_key,
    token_claims,
    unique,
)


def _summarize(text: str) -> dict[str, Any]:
    return {"operation": "summarize", "input": {"text": text}}


def _without_correlation(answer: Answer) -> dict[str, Any]:
    return {key: value for key, value in answer.body.items() if key != "correlationId"}


def _job_routes(job_id: str) -> list[tuple[str, str]]:
    return [
        ("GET", f"/v1/jobs/{job_id}"),
        ("GET", f"/v1/jobs/{job_id}/result"),
        ("POST", f"/v1/jobs/{job_id}/cancellation"),
    ]


def _assert_looks_missing(stack: RunningStack, token: str, job_id: str) -> None:
    """Someone else's job answers exactly like a job that never existed (apart from the request id)."""
    for (method, path), (_, missing_path) in zip(
        _job_routes(job_id), _job_routes(str(uuid.uuid4())), strict=True
    ):
        theirs = stack.call(method, path, token=token)
        missing = stack.call(method, missing_path, token=token)
        assert_problem(theirs, 404, "job_not_found")
        assert_problem(missing, 404, "job_not_found")
        assert _without_correlation(theirs) == _without_correlation(missing)
        assert theirs.headers.get("content-type") == missing.headers.get("content-type")


# --- ownership --------------------------------------------------------------------------------


def test_another_user_gets_404_for_status_result_and_cancel(stack: RunningStack) -> None:
    alice, bob = stack.token(unique("authz-alice"), "shared"), stack.token(unique("authz-bob"), "shared")
    running = stack.submit(alice, _summarize(f"{unique('a')}. [[delay:2]]")).body["jobId"]
    _assert_looks_missing(stack, bob, running)  # while it is Pending or Running: cancel would work for alice
    document = stack.wait_terminal(running, alice)
    assert document["status"] == "Succeeded"  # bob's cancel did nothing
    assert document["cancelRequestedAt"] is None
    _assert_looks_missing(stack, bob, running)  # Succeeded: bob gets no 409 either
    assert stack.call("GET", f"/v1/jobs/{running}/result", token=alice).status == 200


def test_the_same_user_under_another_tenant_is_another_caller(stack: RunningStack) -> None:
    user = unique("authz-tenant")
    # The first token keeps its tenant after the admin moves the user: tokens live an hour.
    first = stack.token(user, "tenant-one")
    second = stack.token(user, "tenant-two")
    assert token_claims(first)["sub"] == token_claims(second)["sub"]
    assert token_claims(first)["custom:tenant"] == "tenant-one"
    assert token_claims(second)["custom:tenant"] == "tenant-two"

    key = new_key()
    job_id = stack.submit(first, _summarize(unique("t1")), key).body["jobId"]
    _assert_looks_missing(stack, second, job_id)
    assert stack.call("GET", "/v1/jobs", token=second).body["items"] == []
    # The idempotency key is scoped to tenant + owner too: the same key is a new job there.
    other = stack.submit(second, _summarize(unique("t2")), key)
    assert other.status == 202
    assert other.body["jobId"] != job_id
    assert "idempotent-replayed" not in other.headers
    assert stack.call("GET", f"/v1/jobs/{job_id}", token=first).status == 200


def test_an_idempotency_key_belongs_to_its_caller(stack: RunningStack) -> None:
    alice, bob = stack.token(unique("authz-alice")), stack.token(unique("authz-bob"))
    key, body = new_key(), _summarize(unique("same"))
    mine = stack.submit(alice, body, key)
    theirs = stack.submit(bob, body, key)  # same key, same body, another caller
    assert (mine.status, theirs.status) == (202, 202)
    assert mine.body["jobId"] != theirs.body["jobId"]
    assert "idempotent-replayed" not in theirs.headers


def test_a_list_never_shows_another_callers_jobs_nor_takes_their_cursor(stack: RunningStack) -> None:
    alice, bob = stack.token(unique("authz-alice"), "shared"), stack.token(unique("authz-bob"), "shared")
    alices = {stack.submit(alice, _summarize(unique("a"))).body["jobId"] for _ in range(2)}
    bobs = {stack.submit(bob, _summarize(unique("b"))).body["jobId"]}
    assert {item["jobId"] for item in stack.call("GET", "/v1/jobs", token=bob).body["items"]} == bobs
    assert {item["jobId"] for item in stack.call("GET", "/v1/jobs", token=alice).body["items"]} == alices
    for status in ("Pending", "Running", "Succeeded"):
        listed = stack.call("GET", f"/v1/jobs?status={status}&limit=100", token=bob).body["items"]
        assert not {item["jobId"] for item in listed} & alices
    cursor = stack.call("GET", "/v1/jobs?limit=1", token=alice).body["nextCursor"]
    assert cursor
    assert_problem(stack.call("GET", f"/v1/jobs?limit=1&cursor={cursor}", token=bob), 400, "invalid_cursor")
    assert stack.call("GET", f"/v1/jobs?limit=1&cursor={cursor}", token=alice).status == 200


# --- tokens -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_claims(stack: RunningStack) -> dict[str, Any]:
    """The claims of a genuine ID token of the local pool, to forge variations of."""
    return token_claims(stack.token(unique("authz-forged"), "forged"))


def test_a_token_signed_with_the_pools_key_is_accepted(
    stack: RunningStack, real_claims: dict[str, Any]
) -> None:
    """The control for the forged tokens below: with valid claims, the signer's tokens pass."""
    now = int(time.time())
    token = forge_token({**real_claims, "iat": now, "auth_time": now, "exp": now + 600})
    assert stack.call("GET", "/v1/jobs", token=token).status == 200


def test_an_expired_token_is_401_from_the_authorizer(
    stack: RunningStack, real_claims: dict[str, Any]
) -> None:
    past = int(time.time()) - 7200
    expired = forge_token({**real_claims, "iat": past, "auth_time": past, "exp": past + 3600})
    for method, path in (("GET", "/v1/jobs"), ("POST", "/v1/jobs"), ("GET", f"/v1/jobs/{uuid.uuid4()}")):
        headers = {"Idempotency-Key": new_key()} if method == "POST" else None
        body = _summarize("x") if method == "POST" else None
        assert_api_gateway_401(stack.call(method, path, token=expired, body=body, headers=headers))


@pytest.mark.parametrize(
    "change",
    [
        {"iss": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_someoneelse"},
        {"aud": "some-other-client"},
        {"nbf": 4_102_444_800},
        {"exp": None},
        # API Gateway: "iat - Must be before the current time in UTC."
        {"iat": 4_102_444_800, "auth_time": 4_102_444_800},
    ],
    ids=["another issuer", "another audience", "not yet valid", "no expiry", "issued in the future"],
)
def test_a_token_with_wrong_claims_is_401(
    stack: RunningStack, real_claims: dict[str, Any], change: dict[str, Any]
) -> None:
    now = int(time.time())
    claims = {**real_claims, "iat": now, "exp": now + 600, **change}
    token = forge_token({k: v for k, v in claims.items() if v is not None})
    assert_api_gateway_401(stack.call("GET", "/v1/jobs", token=token))


@pytest.mark.parametrize(
    "header",
    [{"alg": "RS256", "typ": "JWT"}, {"alg": "RS256", "kid": "another-key", "typ": "JWT"}],
    ids=["no kid", "unknown kid"],
)
def test_a_token_whose_kid_names_no_key_of_the_pool_is_401(
    stack: RunningStack, real_claims: dict[str, Any], header: dict[str, str]
) -> None:
    """API Gateway: "kid - The token must have a header claim that matches the key in the
    jwks_uri that signed the token." The signature itself is valid here."""
    now = int(time.time())
    token = forge_token({**real_claims, "iat": now, "exp": now + 600}, header)
    assert_api_gateway_401(stack.call("GET", "/v1/jobs", token=token))


def test_a_real_token_of_another_app_client_is_401(stack: RunningStack) -> None:
    cognito = stack.aws("cognito-idp")
    client = cognito.create_user_pool_client(
        UserPoolId=stack.state["userPoolId"],
        ClientName=unique("other-app"),
        ExplicitAuthFlows=["ALLOW_ADMIN_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
    )["UserPoolClient"]["ClientId"]
    user = unique("authz-other-app")
    stack.token(user)
    tokens = stack.sign_in(user, client_id=client)
    assert token_claims(tokens["IdToken"])["aud"] == client
    assert_api_gateway_401(stack.call("GET", "/v1/jobs", token=tokens["IdToken"]))
    assert_api_gateway_401(stack.call("GET", "/v1/jobs", token=tokens["AccessToken"]))


def test_a_tampered_token_is_401(stack: RunningStack) -> None:
    victim = token_claims(stack.token(unique("authz-victim")))
    token = stack.token(unique("authz-mallory"))
    header, payload, signature = token.split(".")
    # Claim to be someone else, keeping the original signature.
    mallory = token_claims(token)
    forged_payload = forge_token({**mallory, "sub": victim["sub"]}).split(".")[1]
    flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
    unsigned = forge_token(mallory).split(".")[1]
    none_header = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0"  # {"alg":"none","typ":"JWT"}
    for candidate in (
        f"{header}.{forged_payload}.{signature}",
        f"{header}.{payload}.{flipped}",
        f"{none_header}.{unsigned}.",
        f"{header}.{payload}",
        "",
    ):
        assert_api_gateway_401(stack.call("GET", "/v1/jobs", token=candidate))


def test_no_authorization_header_is_401_on_every_route(stack: RunningStack) -> None:
    job_id = str(uuid.uuid4())
    for method, path in [("GET", "/v1/jobs"), ("POST", "/v1/jobs"), *_job_routes(job_id)]:
        assert_api_gateway_401(stack.call(method, path))
