"""Which API a client talks to and with which token, resolved one way for the command line and
the Python client.

API URL: the one given, else $OUTLAST_API_URL, else the profile's, else the local stack's default
(http://127.0.0.1:8000). Token: the one given, else $OUTLAST_TOKEN (or another variable) when
set, for scripts and CI; else the profile's sign-in (`outlast login`), its ID token refreshed
when it expires.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from outlast.api.http import TokenSource, is_bearer_token
from outlast.auth.profiles import load_profile, profile_name
from outlast.auth.store import default_store
from outlast.auth.tokens import TOKEN_ENV, NotSignedInError, StoredToken, token_from_environment

DEFAULT_API_URL = "http://127.0.0.1:8000"
API_URL_ENV = "OUTLAST_API_URL"


class BadTokenError(ValueError):
    """The variable holds something that cannot be a bearer token (never echoed: it is a secret)."""


@dataclass(frozen=True)
class Connection:
    """The API's base URL and where the bearer token comes from."""

    api_url: str
    token: str | TokenSource
    signed_in: bool  # the token is the profile's sign-in (not a variable or an argument)


def resolve(
    api_url: str | None = None,
    *,
    profile: str | None = None,
    token: str | None = None,
    token_env: str = TOKEN_ENV,
) -> Connection:
    """The connection a client uses (NotSignedInError when there is no token to use)."""
    name = profile_name(profile)
    stored = load_profile(name)
    found = token if token is not None else token_from_environment(token_env)
    source: str | TokenSource
    if found is not None:
        if not is_bearer_token(found):
            raise BadTokenError(
                f"${token_env} does not hold a token: it has spaces, line breaks or characters "
                "outside visible ASCII"
            )
        source = found
    elif stored is not None:
        source = StoredToken(name, default_store())
    else:
        raise NotSignedInError(
            f"not signed in: run `outlast login` (profile {name}), or set ${token_env} to an ID token "
            "(locally: export OUTLAST_TOKEN=$(outlast local token --user NAME))"
        )
    url = api_url or os.environ.get(API_URL_ENV) or (stored.api_url if stored else DEFAULT_API_URL)
    return Connection(url, source, signed_in=found is None)
