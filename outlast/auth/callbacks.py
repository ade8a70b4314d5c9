"""The CLI app client's registered redirect URIs: a few fixed loopback ports.

Cognito matches callback URLs exactly, port included, so the CLI cannot take any free port: the
template registers these (infra/constructs/auth.py imports them) and `outlast login` binds
127.0.0.1 on the first one that is free. Cognito accepts the loopback IP literal over plain http
(RFC 8252, section 7.3).
"""

from __future__ import annotations

CALLBACK_HOST = "127.0.0.1"
CALLBACK_PATH = "/callback"
CALLBACK_PORTS = (29170, 29171, 29172)
# What the CLI asks for: an ID token with the user's name and tenant; nothing that can change the
# user (no aws.cognito.signin.user.admin).
CLI_SCOPES = ("openid", "email", "profile")


def callback_url(port: int) -> str:
    """The redirect URI for one of the registered ports."""
    return f"http://{CALLBACK_HOST}:{port}{CALLBACK_PATH}"


CALLBACK_URLS = tuple(callback_url(port) for port in CALLBACK_PORTS)
