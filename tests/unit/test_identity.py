"""The caller from the JWT claims: Cognito ID tokens only, owner = sub, tenant or `user:{sub}`."""

from __future__ import annotations

from typing import Any

import pytest

from shared.errors import UnauthorizedError
from shared.identity import caller_from_claims
from shared.job import Caller

SUB = "3f1c9a52-7b1e-4c1a-9d2e-8a6b5c4d3e2f"


def claims(**overrides: Any) -> dict[str, Any]:
    """ID-token claims as API Gateway's JWT authorizer hands them over; None removes a claim."""
    base: dict[str, Any] = {
        "token_use": "id",
        "sub": SUB,
        "custom:tenant": "acme",
        "iss": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_example",
        "aud": "client-id",
    }
    merged = {**base, **{key.replace("__", ":"): value for key, value in overrides.items()}}
    return {key: value for key, value in merged.items() if value is not None}


def test_an_id_token_with_a_tenant_names_the_tenant_and_the_sub() -> None:
    assert caller_from_claims(claims()) == Caller(tenant="acme", sub=SUB)


def test_without_a_tenant_the_caller_has_a_personal_tenant() -> None:
    caller = caller_from_claims(claims(custom__tenant=None))

    assert caller == Caller(tenant=f"user:{SUB}", sub=SUB)


def test_the_same_sub_in_two_tenants_is_two_owners() -> None:
    in_acme = caller_from_claims(claims())
    in_globex = caller_from_claims(claims(custom__tenant="globex"))
    personal = caller_from_claims(claims(custom__tenant=None))

    assert len({in_acme.owner_key, in_globex.owner_key, personal.owner_key}) == 3


@pytest.mark.parametrize("token_use", ["access", "ID", "", None, 1])
def test_only_an_id_token_is_accepted(token_use: Any) -> None:
    with pytest.raises(UnauthorizedError):
        caller_from_claims(claims(token_use=token_use))


@pytest.mark.parametrize("empty", [None, {}])
def test_no_claims_at_all_is_unauthorized(empty: dict[str, Any] | None) -> None:
    with pytest.raises(UnauthorizedError):
        caller_from_claims(empty)


@pytest.mark.parametrize(
    "sub",
    [None, "", 42, ["a"], "a b", "a#b", "a/b", "a\tb", "é", "x" * 129, "abc\n"],
    ids=[
        "missing",
        "empty",
        "int",
        "list",
        "space",
        "hash",
        "slash",
        "tab",
        "non-ascii",
        "too long",
        "trailing newline",
    ],
)
def test_a_missing_or_malformed_sub_is_unauthorized(sub: Any) -> None:
    with pytest.raises(UnauthorizedError):
        caller_from_claims(claims(sub=sub))


def test_a_sub_of_128_safe_characters_is_accepted() -> None:
    sub = "a" * 120 + "._:@+=-9"

    assert caller_from_claims(claims(sub=sub)).sub == sub


@pytest.mark.parametrize("tenant", ["user:someone", f"user:{SUB}", "user:"])
def test_a_tenant_in_the_personal_namespace_is_unauthorized(tenant: str) -> None:
    # Otherwise an admin-set tenant could alias someone's personal tenant.
    with pytest.raises(UnauthorizedError):
        caller_from_claims(claims(custom__tenant=tenant))


@pytest.mark.parametrize(
    "tenant",
    ["", "a b", "a#b", "ac/me", 7, True, "x" * 129, "acme\n"],
    ids=["empty", "space", "hash", "slash", "int", "bool", "too long", "trailing newline"],
)
def test_a_malformed_tenant_is_unauthorized(tenant: Any) -> None:
    with pytest.raises(UnauthorizedError):
        caller_from_claims(claims(custom__tenant=tenant))


def test_the_error_detail_does_not_echo_the_claims() -> None:
    with pytest.raises(UnauthorizedError) as caught:
        caller_from_claims(claims(sub="not a valid sub"))

    assert "not a valid sub" not in caught.value.detail
