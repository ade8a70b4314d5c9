"""One sign-in: the browser to the authorize endpoint, the code back on the loopback redirect,
the code (with its PKCE verifier) for tokens."""

from __future__ import annotations

from collections.abc import Callable

from outlast.auth.callbacks import CALLBACK_PORTS, CLI_SCOPES
from outlast.auth.loopback import LoopbackRedirect, SignInError
from outlast.auth.oauth import AuthServer, Tokens
from outlast.auth.pkce import challenge_of, new_state, new_verifier

SIGN_IN_TIMEOUT_SECONDS = 300.0  # an authorization code lasts five minutes anyway


def sign_in(
    server: AuthServer,
    show_url: Callable[[str], None],
    *,
    timeout_seconds: float = SIGN_IN_TIMEOUT_SECONDS,
    ports: tuple[int, ...] = CALLBACK_PORTS,
) -> Tokens:
    """Sign in through the browser; `show_url` gets the URL to open (and may open it)."""
    state, verifier = new_state(), new_verifier()
    with LoopbackRedirect(state, ports) as loopback:
        redirect_uri = loopback.redirect_uri
        show_url(server.authorize_url(redirect_uri, state, challenge_of(verifier), CLI_SCOPES))
        redirect = loopback.wait(timeout_seconds)
    if redirect.code is None:
        raise SignInError(f"the sign-in was refused ({redirect.error})")
    return server.exchange(redirect.code, redirect_uri, verifier)
