"""The JWT authorizer of an HTTP API, as API Gateway applies it: signature, issuer, audience, expiry.

API Gateway fetches the issuer's JWKS from `{issuer}/.well-known/jwks.json`. A Cognito issuer
is `https://cognito-idp.{region}.amazonaws.com/{poolId}`, which moto serves locally at
`{moto}/{poolId}/.well-known/jwks.json`; that is the only difference from AWS.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet


class Unauthorized(Exception):  # noqa: N818 - named after the answer API Gateway gives
    """The token is missing, malformed, badly signed, for another audience or expired."""


@dataclass(frozen=True)
class JwtAuthorizer:
    """One AWS::ApiGatewayV2::Authorizer of type JWT, resolved."""

    issuer: str
    audiences: tuple[str, ...]
    jwks_url: str
    identity_header: str = "authorization"


class JwtVerifier:
    """Verifies tokens for one authorizer; the JWKS is fetched once and cached."""

    def __init__(self, authorizer: JwtAuthorizer) -> None:
        self.authorizer = authorizer
        self._keys: KeySet | None = None
        self._lock = threading.Lock()

    def _key_set(self) -> KeySet:
        with self._lock:
            if self._keys is None:
                with urllib.request.urlopen(self.authorizer.jwks_url, timeout=5) as response:  # noqa: S310 - local moto
                    self._keys = KeySet.import_key_set(json.loads(response.read()))
            return self._keys

    def claims(self, headers: dict[str, str]) -> dict[str, Any]:
        """The verified claims of the request's token, or Unauthorized."""
        raw = headers.get(self.authorizer.identity_header, "").strip()
        if not raw:
            raise Unauthorized("no token")
        token = raw[7:].strip() if raw.lower().startswith("bearer ") else raw
        keys = self._key_set()
        # API Gateway needs a `kid` naming a key of the issuer's JWKS; without this check joserfc
        # would try a key of the set on a token that names none.
        kid = _header(token).get("kid")
        if not isinstance(kid, str) or kid not in {key.kid for key in keys.keys}:
            raise Unauthorized("unknown signing key")
        try:
            decoded = jwt.decode(token, keys, algorithms=["RS256"])
        except (JoseError, ValueError) as error:
            raise Unauthorized("invalid token") from error
        claims = dict(decoded.claims)
        self._check(claims)
        return claims

    def _check(self, claims: dict[str, Any]) -> None:
        now = time.time()
        if claims.get("iss") != self.authorizer.issuer:
            raise Unauthorized("wrong issuer")
        # API Gateway accepts the audience in `aud` (ID tokens) or `client_id` (access tokens).
        audience = claims.get("aud", claims.get("client_id"))
        audiences: Sequence[Any] = audience if isinstance(audience, list) else [audience]
        if not any(a in self.authorizer.audiences for a in audiences):
            raise Unauthorized("wrong audience")
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or exp <= now:
            raise Unauthorized("expired")
        nbf = claims.get("nbf")
        if isinstance(nbf, int | float) and nbf > now:
            raise Unauthorized("not yet valid")
        iat = claims.get("iat")
        if isinstance(iat, int | float) and iat > now:
            raise Unauthorized("issued in the future")


def _header(token: str) -> dict[str, Any]:
    """The JOSE header of a compact JWS, or {} when it is not one."""
    segment = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, binascii.Error):
        return {}
    return header if isinstance(header, dict) else {}


def as_api_gateway_claims(claims: dict[str, Any]) -> dict[str, str]:
    """Claims as an HTTP API passes them to the function: every value a string."""

    def text(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return "[" + " ".join(text(item) for item in value) + "]"
        return str(value)

    return {key: text(value) for key, value in claims.items()}
