"""Clients of a running local stack (its state file names everything): a boto3 client for its
moto, and an ID token from its user pool. Used by `outlast local token`, the operator tools'
`--local`, the demo, chaos, the benchmarks and the tests."""

from __future__ import annotations

from typing import Any

import boto3

from outlast.local.users import sign_in


def local_client(service: str, state: dict[str, Any]) -> Any:
    """A boto3 client for the local stack's moto, with its dummy credentials (never the caller's)."""
    return boto3.client(  # type: ignore[call-overload]
        service,
        endpoint_url=state["awsEndpoint"],
        region_name=state["region"],
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 - moto's dummy credentials
    )


def issue_token(state: dict[str, Any], user: str, tenant: str | None) -> str:
    """An ID token from the local user pool; the user is created (or its tenant updated) first."""
    cognito = local_client("cognito-idp", state)
    result = sign_in(cognito, state["userPoolId"], state["userPoolClientId"], user, tenant)
    return str(result["IdToken"])
