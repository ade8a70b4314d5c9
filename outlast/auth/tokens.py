"""The bearer token of a command: $OUTLAST_TOKEN (or the variable --token-env names) when set,
else the signed-in profile's ID token, refreshed without a prompt when it has expired."""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from dataclasses import dataclass, replace
from typing import Any

from outlast.auth.oauth import AuthServer, OAuthError
from outlast.auth.store import Credentials, CredentialStore

TOKEN_ENV = "OUTLAST_TOKEN"  # noqa: S105 - the variable's name, not a token
# Refresh a little early: a token that expires in flight is a 401 for a request that was fine.
EXPIRY_MARGIN_SECONDS = 60


class NotSignedInError(Exception):
    """No token: neither the variable nor a signed-in profile (or its sign-in ended)."""


def unverified_claims(token: str) -> dict[str, Any]:
    """A JWT's claims, read without verifying the signature: only to know when it expires and
    whom it names (the API verifies every token it is sent). {} when it is not a JWT."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError, binascii.Error):
        return {}
    return claims if isinstance(claims, dict) else {}


def expires_at(id_token: str) -> float:
    """The token's `exp` (epoch seconds); a token we cannot read counts as expired."""
    try:
        return float(unverified_claims(id_token)["exp"])
    except (KeyError, TypeError, ValueError):
        return 0.0


@dataclass
class StoredToken:
    """A profile's ID token from the store, refreshed through its issuer when it expires."""

    profile: str
    store: CredentialStore

    def __call__(self) -> str:
        """A current ID token (refreshing it first when it expired)."""
        credentials = self.store.load(self.profile)
        if credentials is None:
            raise NotSignedInError(f"not signed in (profile {self.profile}): run `outlast login`")
        if expires_at(credentials.id_token) - EXPIRY_MARGIN_SECONDS > time.time():
            return credentials.id_token
        return self.refresh(credentials).id_token

    def refresh(self, credentials: Credentials) -> Credentials:
        """A new ID token for the stored refresh token, kept in the store."""
        server = AuthServer(credentials.auth_url, credentials.client_id)
        try:
            tokens = server.refresh(credentials.refresh_token)
        except OAuthError as error:
            if error.error in {"invalid_grant", "invalid_client", "unauthorized_client"}:
                raise NotSignedInError(
                    f"the sign-in of profile {self.profile} has ended ({error.error}): run `outlast login`"
                ) from None
            raise
        renewed = replace(
            credentials,
            id_token=tokens.id_token,
            refresh_token=tokens.refresh_token or credentials.refresh_token,
        )
        self.store.save(self.profile, renewed)
        return renewed


def token_from_environment(variable: str = TOKEN_ENV) -> str | None:
    """The token in the variable, stripped; None when it is unset or empty."""
    value = os.environ.get(variable, "").strip()
    return value or None
