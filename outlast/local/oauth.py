"""Cognito's managed-login endpoints for the public app clients (the console's and the command
line's), in local mode only.

The console and `outlast login` sign in with the authorization code grant and PKCE, the same code
against Cognito in AWS and against this locally (DESIGN.md, "Web console", "The command line").
The local front serves:

- `GET /oauth2/authorize`: a sign-in form (user name and tenant, labelled, keyboard usable; local
  mode has no passwords). Its POST signs the user in to the local user pool (created if missing,
  its tenant set as an admin would) and redirects to `redirect_uri?code=...&state=...`.
- `POST /oauth2/token`: `grant_type=authorization_code`, `client_id`, `code`, `redirect_uri`,
  `code_verifier` (form-encoded) -> `{id_token, access_token, refresh_token, expires_in,
  token_type}` as Cognito answers; `grant_type=refresh_token`, `client_id`, `refresh_token` ->
  the same without a new refresh token; errors are Cognito's `{"error": ...}` with 400.
- `POST /oauth2/revoke`: `token` (a refresh token), `client_id` -> 200 and an empty body; the
  token refreshes nothing after that (`invalid_grant`), as Cognito's revocation does.
- `GET /logout?client_id=&logout_uri=`: back to the console (a sign-out URL of the client).

As Cognito does: a redirect or sign-out URI must be one the client lists, exactly; a code is
single-use, bound to its client, redirect URI and PKCE challenge (S256 only), and lasts 5 minutes.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

CODE_SECONDS = 300  # Cognito's authorization codes last five minutes
_USER = re.compile(r"^[\w.@+-]{1,128}$")
_TENANT = re.compile(r"^[\w.@:+-]{1,64}$")  # custom:tenant is 1-64 characters (infra/constructs/auth.py)
_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # base64url of a SHA-256 digest, no padding
_VERIFIER = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")  # RFC 7636, section 4.1
_FORM_FIELDS = ("response_type", "client_id", "redirect_uri", "state", "scope", "code_challenge",
                "code_challenge_method")  # fmt: skip

Answer = tuple[int, dict[str, str], bytes]
# (client id, user, tenant) -> Cognito's AuthenticationResult for that client.
SignIn = Callable[[str, str, str | None], Mapping[str, Any]]
# (client id, refresh token) -> AuthenticationResult (IdToken, AccessToken, ExpiresIn); raises on a
# token the user pool does not know.
Refresh = Callable[[str, str], Mapping[str, Any]]


@dataclass(frozen=True)
class PublicClient:
    """A public app client: its id and the URLs it may be sent back to."""

    client_id: str
    callback_urls: tuple[str, ...]
    logout_urls: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()  # CORS for the token endpoint: the console's origin


@dataclass(frozen=True)
class _Code:
    client_id: str
    redirect_uri: str
    challenge: str
    tokens: Mapping[str, Any]
    expires: float


def _challenge_of(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _page(status: int, body: str, form_targets: str = "") -> Answer:
    document = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Sign in to outlast (local)</title></head><body><main>{body}</main></body></html>"
    )
    headers = {
        "Content-Type": "text/html; charset=utf-8",
        "Cache-Control": "no-store",
        # No script, no style: the page is a plain form. Chromium checks form-action on the
        # redirect that follows the post too, so the console's origin is allowed there.
        "Content-Security-Policy": (
            f"default-src 'none'; form-action 'self' {form_targets}; frame-ancestors 'none'; base-uri 'none'"
        ).replace("  ", " "),
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
    }
    return status, headers, document.encode()


def _json(status: int, document: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> Answer:
    return (
        status,
        {
            "Content-Type": "application/json",
            "Cache-Control": "no-store",
            "Pragma": "no-cache",
            **(headers or {}),
        },
        json.dumps(document).encode(),
    )


def _redirect(location: str) -> Answer:
    return 302, {"Location": location, "Cache-Control": "no-store"}, b""


def _with_query(url: str, parameters: Mapping[str, str]) -> str:
    separator = "&" if urllib.parse.urlsplit(url).query else "?"
    return url + separator + urllib.parse.urlencode(parameters)


def _origin_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _fingerprint(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class LocalAuthorizationServer:
    """/oauth2/authorize, /oauth2/token, /oauth2/revoke and /logout for public clients (thread-safe)."""

    def __init__(self, clients: tuple[PublicClient, ...], sign_in: SignIn, refresh: Refresh) -> None:
        self.clients = {client.client_id: client for client in clients}
        self._sign_in = sign_in
        self._refresh = refresh
        self._codes: dict[str, _Code] = {}
        self._revoked: set[str] = set()  # fingerprints of revoked refresh tokens
        self._lock = threading.Lock()

    def answer(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> Answer | None:
        """The answer for a request to one of the endpoints; None for any other path."""
        if path == "/oauth2/authorize":
            if method == "GET":
                return self._authorize(dict(urllib.parse.parse_qsl(query)))
            if method == "POST":
                return self._sign_in_posted(dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"))))
            return _json(405, {"error": "invalid_request"})
        form_endpoints = {"/oauth2/token": self._token_endpoint, "/oauth2/revoke": self._revoke_endpoint}
        if path in form_endpoints:
            return form_endpoints[path](method, headers, body)
        if path == "/logout" and method == "GET":
            return self._logout(dict(urllib.parse.parse_qsl(query)))
        return None

    # --- authorize -------------------------------------------------------------------------------

    def _checked(self, parameters: Mapping[str, str]) -> Answer | None:
        """None when the request may proceed; else the answer (an error page or a redirect)."""
        client = self.clients.get(parameters.get("client_id", ""))
        if client is None:
            return _page(400, "<h1>Sign-in failed</h1><p>The app client is not known here.</p>")
        redirect = parameters.get("redirect_uri", "")
        if redirect not in client.callback_urls:
            return _page(400, "<h1>Sign-in failed</h1><p>The redirect URI is not one of the client's.</p>")
        problem = None
        if parameters.get("response_type") != "code":
            problem = "unsupported_response_type"
        elif parameters.get("code_challenge_method") != "S256" or not _CHALLENGE.match(
            parameters.get("code_challenge", "")
        ):
            problem = "invalid_request"
        elif "openid" not in parameters.get("scope", "").split():
            problem = "invalid_scope"
        if problem is None:
            return None
        return _redirect(_with_query(redirect, {"error": problem, "state": parameters.get("state", "")}))

    def _authorize(self, parameters: Mapping[str, str], error: str | None = None, user: str = "",
                   tenant: str = "") -> Answer:  # fmt: skip
        refused = self._checked(parameters)
        if refused is not None:
            return refused
        hidden = "".join(
            f'<input type="hidden" name="{name}" value="{html.escape(parameters.get(name, ""))}">'
            for name in _FORM_FIELDS
        )
        message = f'<p role="alert" id="error">{html.escape(error)}</p>' if error else ""
        body = (
            "<h1>Sign in to outlast</h1>"
            "<p>Local mode: there are no passwords. Any user name signs in, and a new one is created; "
            "the tenant is set on the user as an administrator would set it.</p>"
            f"{message}"
            '<form method="post" action="/oauth2/authorize">'
            f"{hidden}"
            '<p><label for="username">User name</label><br>'
            f'<input id="username" name="username" value="{html.escape(user)}" required autofocus '
            'autocomplete="username" maxlength="128"></p>'
            '<p><label for="tenant">Tenant (optional)</label><br>'
            f'<input id="tenant" name="tenant" value="{html.escape(tenant)}" autocomplete="organization" '
            'maxlength="64" aria-describedby="tenant-help"></p>'
            '<p id="tenant-help">Without a tenant, the user is a tenant of their own.</p>'
            '<p><button type="submit">Sign in</button></p>'
            "</form>"
        )
        return _page(400 if error else 200, body, _origin_of(parameters["redirect_uri"]))

    def _sign_in_posted(self, form: Mapping[str, str]) -> Answer:
        refused = self._checked(form)
        if refused is not None:
            return refused
        user, tenant = form.get("username", "").strip(), form.get("tenant", "").strip()
        if not _USER.match(user):
            return self._authorize(
                form, "Enter a user name: letters, digits and . _ @ + - only.", user, tenant
            )
        if tenant and not _TENANT.match(tenant):
            return self._authorize(form, "A tenant is 1-64 letters, digits or . _ @ : + -.", user, tenant)
        tokens = self._sign_in(form["client_id"], user, tenant or None)
        code = secrets.token_urlsafe(32)
        with self._lock:
            now = time.monotonic()
            self._codes = {k: v for k, v in self._codes.items() if v.expires > now}
            self._codes[code] = _Code(
                client_id=form["client_id"],
                redirect_uri=form["redirect_uri"],
                challenge=form["code_challenge"],
                tokens=tokens,
                expires=now + CODE_SECONDS,
            )
        return _redirect(_with_query(form["redirect_uri"], {"code": code, "state": form.get("state", "")}))

    # --- token -----------------------------------------------------------------------------------

    def _cors(self, headers: Mapping[str, str]) -> dict[str, str]:
        origin = headers.get("origin")
        allowed = {o for client in self.clients.values() for o in client.allowed_origins}
        if origin is None or origin not in allowed:
            return {}
        return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}

    def _form(self, method: str, headers: Mapping[str, str], body: bytes) -> Answer | dict[str, str]:
        """The posted form, or the answer to a request that is not one (CORS preflight included)."""
        cors = self._cors(headers)
        if method == "OPTIONS":
            allow = {"Access-Control-Allow-Methods": "POST", "Access-Control-Allow-Headers": "Content-Type"}
            return 204, {**cors, **(allow if cors else {})}, b""
        if method != "POST":
            return _json(405, {"error": "invalid_request"}, cors)
        if not headers.get("content-type", "").lower().startswith("application/x-www-form-urlencoded"):
            return _json(400, {"error": "invalid_request"}, cors)
        return dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace")))

    def _token_endpoint(self, method: str, headers: Mapping[str, str], body: bytes) -> Answer:
        form = self._form(method, headers, body)
        if isinstance(form, tuple):
            return form
        if form.get("client_id", "") not in self.clients:
            status, document = 400, {"error": "invalid_client"}
        elif form.get("grant_type") == "authorization_code":
            status, document = self._exchange(form)
        elif form.get("grant_type") == "refresh_token":
            status, document = self._refreshed(form)
        else:
            status, document = 400, {"error": "unsupported_grant_type"}
        return _json(status, document, self._cors(headers))

    def _revoke_endpoint(self, method: str, headers: Mapping[str, str], body: bytes) -> Answer:
        form = self._form(method, headers, body)
        if isinstance(form, tuple):
            return form
        cors = self._cors(headers)
        if not form.get("token"):
            return _json(400, {"error": "invalid_request"}, cors)
        if form.get("client_id", "") not in self.clients:
            return _json(400, {"error": "invalid_client"}, cors)
        with self._lock:
            self._revoked.add(_fingerprint(form["token"]))
        # Cognito answers an empty 200, for a token it knows or not (RFC 7009, section 2.2).
        return 200, {"Cache-Control": "no-store", **cors}, b""

    def _refreshed(self, form: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        token = form.get("refresh_token", "")
        with self._lock:
            revoked = _fingerprint(token) in self._revoked
        if not token or revoked:
            return 400, {"error": "invalid_grant"}
        try:
            tokens = self._refresh(form["client_id"], token)
        except Exception:  # noqa: BLE001 - whatever the pool says of a token it cannot use: invalid_grant
            return 400, {"error": "invalid_grant"}
        return 200, {
            "id_token": tokens["IdToken"],
            "access_token": tokens["AccessToken"],
            "expires_in": int(tokens.get("ExpiresIn", 3600)),
            "token_type": "Bearer",
        }

    def _exchange(self, form: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            found = self._codes.pop(form.get("code", ""), None)  # single use, even when refused below
        verifier = form.get("code_verifier", "")
        if (
            found is None
            or found.expires <= time.monotonic()
            or found.client_id != form["client_id"]
            or found.redirect_uri != form.get("redirect_uri")
            or not _VERIFIER.match(verifier)
            or not secrets.compare_digest(_challenge_of(verifier), found.challenge)
        ):
            return 400, {"error": "invalid_grant"}
        tokens = found.tokens
        return 200, {
            "id_token": tokens["IdToken"],
            "access_token": tokens["AccessToken"],
            "refresh_token": tokens["RefreshToken"],
            "expires_in": int(tokens.get("ExpiresIn", 3600)),
            "token_type": "Bearer",
        }

    # --- logout ----------------------------------------------------------------------------------

    def _logout(self, parameters: Mapping[str, str]) -> Answer:
        target = parameters.get("logout_uri", "")
        client = self.clients.get(parameters.get("client_id", ""))
        if client is None or target not in client.logout_urls:
            return _page(400, "<h1>Sign-out failed</h1><p>The sign-out URL is not one of the client's.</p>")
        return _redirect(target)
