"""Local users: signed in through the local user pool (moto) as a named user with a tenant.

Both `outlast local token` and the local front's /oauth2/authorize sign users in here: the user is
created if missing (or its `custom:tenant` updated), given a fresh random password nobody needs to
know, and signed in with admin auth; moto then issues the tokens, as Cognito would.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from outlast.auth.tokens import unverified_claims

if TYPE_CHECKING:
    from mypy_boto3_cognito_idp.type_defs import AttributeTypeTypeDef


def sign_in(cognito: Any, pool_id: str, client_id: str, user: str, tenant: str | None) -> dict[str, Any]:
    """The AuthenticationResult (IdToken, AccessToken, RefreshToken, ExpiresIn, TokenType) for `user`."""
    attributes: list[AttributeTypeTypeDef] = [{"Name": "custom:tenant", "Value": tenant}] if tenant else []
    try:
        cognito.admin_get_user(UserPoolId=pool_id, Username=user)
        if attributes:
            cognito.admin_update_user_attributes(UserPoolId=pool_id, Username=user, UserAttributes=attributes)
    except cognito.exceptions.UserNotFoundException:
        cognito.admin_create_user(
            UserPoolId=pool_id, Username=user, UserAttributes=attributes, MessageAction="SUPPRESS"
        )
    password = "Aa1!" + secrets.token_urlsafe(16)
    cognito.admin_set_user_password(UserPoolId=pool_id, Username=user, Password=password, Permanent=True)
    result = cognito.admin_initiate_auth(
        UserPoolId=pool_id,
        ClientId=client_id,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": user, "PASSWORD": password},
    )
    authentication: dict[str, Any] = result["AuthenticationResult"]
    return authentication


def refresh(cognito: Any, client_id: str, refresh_token: str) -> dict[str, Any]:
    """A new ID token for a refresh token issued to `client_id` (ValueError for another client's:
    moto, unlike Cognito, does not check)."""
    result = cognito.initiate_auth(
        ClientId=client_id, AuthFlow="REFRESH_TOKEN_AUTH", AuthParameters={"REFRESH_TOKEN": refresh_token}
    )
    authentication: dict[str, Any] = result["AuthenticationResult"]
    if unverified_claims(str(authentication["IdToken"])).get("aud") != client_id:
        raise ValueError("the refresh token belongs to another client")
    return authentication
