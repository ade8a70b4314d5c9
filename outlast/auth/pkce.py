"""PKCE (RFC 7636, S256) and the `state` value of one authorization request."""

from __future__ import annotations

import base64
import hashlib
import secrets


def new_verifier() -> str:
    """A code verifier: 32 random bytes, base64url without padding (43 characters)."""
    return secrets.token_urlsafe(32)


def challenge_of(verifier: str) -> str:
    """The S256 challenge of a verifier: base64url(SHA-256(verifier)), no padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def new_state() -> str:
    """An unguessable `state` that ties the redirect to this request (CSRF, RFC 6749 10.12)."""
    return secrets.token_urlsafe(24)
