"""The token and revocation endpoints of Cognito managed login (and of the local front), for a
public client: form-encoded requests, `{"error": ...}` answers on failure.

- code exchange: `grant_type=authorization_code` with the PKCE verifier;
- refresh: `grant_type=refresh_token` -> a new ID token (Cognito sends no new refresh token);
- revoke: `POST /oauth2/revoke` `token=<refresh token>` (the tokens it issued stop working).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from outlast.api.http import classify_connection_error

TIMEOUT_SECONDS = 30.0


class OAuthError(Exception):
    """The endpoint refused (`error` is its code: invalid_grant, invalid_client, ...)."""

    def __init__(self, error: str, status: int) -> None:
        self.error = error
        self.status = status
        super().__init__(f"{error} (HTTP {status})")


@dataclass(frozen=True)
class Tokens:
    """What a token endpoint answered."""

    id_token: str
    refresh_token: str | None
    expires_in: int


@dataclass(frozen=True)
class AuthServer:
    """One user pool domain (or the local front) and the public client that signs in there."""

    base_url: str
    client_id: str

    def authorize_url(self, redirect_uri: str, state: str, challenge: str, scopes: tuple[str, ...]) -> str:
        """Where the browser goes to sign in."""
        query = urllib.parse.urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": redirect_uri,
                "state": state,
                "scope": " ".join(scopes),
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
        )
        return f"{self.base_url.rstrip('/')}/oauth2/authorize?{query}"

    def exchange(self, code: str, redirect_uri: str, verifier: str) -> Tokens:
        """The authorization code (and its verifier) for tokens."""
        answer = self._post(
            "/oauth2/token",
            {
                "grant_type": "authorization_code",
                "client_id": self.client_id,
                "code": code,
                "redirect_uri": redirect_uri,
                "code_verifier": verifier,
            },
        )
        return _tokens(answer)

    def refresh(self, refresh_token: str) -> Tokens:
        """A fresh ID token for a refresh token (OAuthError invalid_grant once it is revoked or expired)."""
        answer = self._post(
            "/oauth2/token",
            {"grant_type": "refresh_token", "client_id": self.client_id, "refresh_token": refresh_token},
        )
        return _tokens(answer)

    def revoke(self, refresh_token: str) -> None:
        """Revoke a refresh token and the tokens issued with it."""
        self._post("/oauth2/revoke", {"token": refresh_token, "client_id": self.client_id})

    def _post(self, path: str, form: dict[str, str]) -> Any:
        url = self.base_url.rstrip("/") + path
        request = urllib.request.Request(  # noqa: S310 - the profile's URL is checked when it is written
            url,
            data=urllib.parse.urlencode(form).encode(),
            method="POST",
            headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
                raw = response.read()
        except urllib.error.HTTPError as error:
            body = _json(error.read())
            code = body.get("error") if isinstance(body, dict) else None
            raise OAuthError(str(code or "server_error"), error.code) from None
        except OSError as error:
            raise classify_connection_error(self.base_url, error) from None
        return _json(raw)


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        return None


def _tokens(answer: Any) -> Tokens:
    if not isinstance(answer, dict) or not isinstance(answer.get("id_token"), str):
        raise OAuthError("invalid_response", 200)
    refresh = answer.get("refresh_token")
    expires = answer.get("expires_in")
    return Tokens(
        id_token=answer["id_token"],
        refresh_token=refresh if isinstance(refresh, str) else None,
        expires_in=expires if isinstance(expires, int) else 3600,
    )
