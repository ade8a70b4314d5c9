"""The caller, from the JWT claims API Gateway's authorizer passes to the function."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared.errors import UnauthorizedError
from shared.job import Caller

TENANT_CLAIM = "custom:tenant"
PERSONAL_TENANT_PREFIX = "user:"
_SAFE = re.compile(r"[A-Za-z0-9._:@+=-]{1,128}")


def is_safe_identity(value: str) -> bool:
    """Whether a tenant or sub has the shape tokens are held to (no `/`, no `#`, at most 128)."""
    return _SAFE.fullmatch(value) is not None


def caller_from_claims(claims: Mapping[str, Any] | None) -> Caller:
    """Owner = `sub`, tenant = `custom:tenant` or `user:{sub}`; only Cognito ID tokens pass."""
    if not claims:
        raise UnauthorizedError("The request carries no identity.")
    if claims.get("token_use") != "id":
        raise UnauthorizedError("An ID token is required.")
    sub = claims.get("sub")
    if not isinstance(sub, str) or not _SAFE.fullmatch(sub):
        raise UnauthorizedError("The token's subject is missing or malformed.")
    tenant = claims.get(TENANT_CLAIM)
    if tenant is None:
        return Caller(tenant=f"{PERSONAL_TENANT_PREFIX}{sub}", sub=sub)
    # "user:" is reserved for the personal tenant, so no admin-set tenant can alias someone's.
    if (
        not isinstance(tenant, str)
        or not _SAFE.fullmatch(tenant)
        or tenant.startswith(PERSONAL_TENANT_PREFIX)
    ):
        raise UnauthorizedError("The token's tenant is malformed.")
    return Caller(tenant=tenant, sub=sub)
