"""`outlast login` / `logout` over real HTTP: the local front's authorization server (the same code
local mode serves) on a loopback port, a browser played by the test, the CLI's loopback redirect.

The user pool behind it is a fake that issues JWT-shaped tokens with an `exp`, so the CLI's
decisions (refresh when expired, forget when revoked) are what is tested, not moto's tokens; the
end-to-end test (tests/e2e/test_cli_login.py) does the same against a whole local stack.
"""

from __future__ import annotations

import base64
import itertools
import json
import socket
import stat
import threading
import time
import urllib.parse
import webbrowser
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

from outlast.auth.callbacks import CALLBACK_HOST, CALLBACK_PORTS, CALLBACK_URLS
from outlast.auth.oauth import AuthServer, OAuthError
from outlast.auth.profiles import config_dir, load_profile
from outlast.auth.store import Credentials, default_store
from outlast.auth.tokens import NotSignedInError, StoredToken, expires_at
from outlast.cli.errors import ExitCode
from outlast.local.http_handler import LocalRequestHandler
from outlast.local.oauth import LocalAuthorizationServer, PublicClient
from tests.support.cli import run
from tests.support.signin import Browser

pytestmark = pytest.mark.integration

CLIENT_ID = "cliclient1"  # Cognito client ids are [\w+]+


def jwt(claims: dict[str, Any]) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJSUzI1NiJ9.{payload}.c2lnbmF0dXJl"


class FakePool:
    """The user pool: a sign-in or a refresh gets a fresh ID token (one hour), numbered."""

    def __init__(self) -> None:
        self.issued = itertools.count(1)
        self.refreshed: list[str] = []

    def _id_token(self, user: str, tenant: str | None) -> str:
        claims = {
            "sub": f"sub-{user}",
            "cognito:username": user,
            "exp": int(time.time()) + 3600,
            "n": next(self.issued),
        }
        return jwt({**claims, **({"custom:tenant": tenant} if tenant else {})})

    def sign_in(self, client_id: str, user: str, tenant: str | None) -> dict[str, Any]:
        assert client_id == CLIENT_ID
        return {
            "IdToken": self._id_token(user, tenant),
            "AccessToken": "a.b.c",
            "RefreshToken": f"r-{user}",
            "ExpiresIn": 3600,
        }

    def refresh(self, client_id: str, refresh_token: str) -> dict[str, Any]:
        if not refresh_token.startswith("r-"):
            raise ValueError("NotAuthorizedException")
        self.refreshed.append(refresh_token)
        return {"IdToken": self._id_token(refresh_token[2:], None), "AccessToken": "a.b.c", "ExpiresIn": 3600}


@dataclass
class SignInServer:
    url: str
    pool: FakePool

    def login_args(self) -> list[str]:
        return ["login", "--api-url", self.url, "--auth-url", self.url, "--client-id", CLIENT_ID]


class _Handler(LocalRequestHandler):
    server: _Server

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path, _, query = self.path.partition("?")
        headers = {key.lower(): value for key, value in self.headers.items()}
        answer = self.server.authorization.answer(self.command, path, query, headers, body)
        status, response_headers, payload = answer or (404, {}, b"")
        self.send_response(status)
        for name, value in response_headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, authorization: LocalAuthorizationServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.authorization = authorization


@pytest.fixture
def signin_server() -> Iterator[SignInServer]:
    pool = FakePool()
    authorization = LocalAuthorizationServer(
        (PublicClient(CLIENT_ID, CALLBACK_URLS),), pool.sign_in, pool.refresh
    )
    http = _Server(authorization)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield SignInServer(f"http://127.0.0.1:{http.server_address[1]}", pool)
    http.shutdown()
    http.server_close()


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Browser:
    person = Browser("alice", "acme")
    monkeypatch.setattr(webbrowser, "open", person.open)
    return person


def test_login_signs_in_through_the_browser_and_keeps_the_sign_in_owner_only(signin_server, browser):
    code, out, err = run(*signin_server.login_args())

    assert code == ExitCode.OK, err
    assert browser.done.wait(10)
    assert browser.callback_statuses == [200]
    assert f"signed in as alice, tenant acme, to {signin_server.url} (profile default)" in out
    assert "/oauth2/authorize?" in err  # the URL is shown too, for a browser elsewhere
    credentials = config_dir() / "credentials" / "default.json"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert stat.S_IMODE(credentials.parent.stat().st_mode) == 0o700
    saved = default_store().load("default")
    assert saved is not None
    assert saved.refresh_token == "r-alice"
    assert load_profile("default") is not None


def test_the_redirect_uri_is_a_registered_loopback_port_and_carries_the_state(signin_server, browser):
    seen: list[str] = []
    browser.before_callback = seen.append

    assert run(*signin_server.login_args())[0] == ExitCode.OK

    (callback,) = seen
    parts = urllib.parse.urlsplit(callback)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" in CALLBACK_URLS
    assert parts.hostname == CALLBACK_HOST
    assert set(urllib.parse.parse_qs(parts.query)) == {"code", "state"}


def test_a_redirect_with_another_state_is_refused_and_the_sign_in_goes_on(signin_server, browser):
    forged: list[int] = []

    def forge_first(callback: str) -> None:
        # A page elsewhere tries to hand the CLI a code of its own, with a state it guessed.
        forged_url = callback.split("?", 1)[0] + "?code=attacker-code&state=guessed"
        try:
            with urllib.request.urlopen(forged_url, timeout=10) as answer:  # noqa: S310 - loopback
                forged.append(answer.status)
        except urllib.error.HTTPError as refused:
            forged.append(refused.code)

    browser.before_callback = forge_first

    code, _, err = run(*signin_server.login_args())

    assert code == ExitCode.OK, err
    assert forged == [400]
    assert browser.callback_statuses == [200]


def test_a_refused_sign_in_exits_2_and_keeps_nothing(signin_server, browser):
    def refuse(callback: str) -> None:
        state = urllib.parse.parse_qs(urllib.parse.urlsplit(callback).query)["state"][0]
        # The person pressed "cancel": the authorization server sends the error back instead.
        query = urllib.parse.urlencode({"error": "access_denied", "state": state})
        refused_url = callback.split("?", 1)[0] + "?" + query
        try:
            urllib.request.urlopen(refused_url, timeout=10)  # noqa: S310 - loopback
        except urllib.error.HTTPError as answer:
            browser.callback_statuses.append(answer.code)
        raise AssertionError("stop: the real callback is never opened")

    browser.before_callback = refuse

    code, _, err = run(*signin_server.login_args())

    assert code == ExitCode.ERROR
    assert "refused (access_denied)" in err
    assert default_store().load("default") is None


def test_login_with_every_registered_port_taken_says_so(signin_server, browser):
    with ExitStack() as held:
        for port in CALLBACK_PORTS:
            probe = held.enter_context(socket.socket())
            # As a server would hold it (a port in TIME_WAIT from an earlier sign-in is no obstacle).
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((CALLBACK_HOST, port))
                probe.listen()  # another program serving on it
            except OSError:
                continue  # already taken by someone else: taken all the same

        code, _, err = run(*signin_server.login_args())

    assert code == ExitCode.ERROR
    assert "every port registered for the sign-in redirect is in use" in err


def test_login_without_a_profile_or_a_stage_says_how_to_name_one():
    code, _, err = run("login")

    assert code == ExitCode.ERROR
    assert "--outputs" in err


def test_an_expired_id_token_is_refreshed_without_a_prompt(signin_server):
    store = default_store()
    expired = jwt({"sub": "sub-alice", "exp": int(time.time()) - 5})
    store.save("default", Credentials(expired, "r-alice", signin_server.url, CLIENT_ID))

    token = StoredToken("default", store)()

    assert token != expired
    assert expires_at(token) > time.time()
    assert signin_server.pool.refreshed == ["r-alice"]
    saved = store.load("default")
    assert saved is not None
    assert saved.id_token == token  # kept: the next command does not refresh again
    assert StoredToken("default", store)() == token
    assert signin_server.pool.refreshed == ["r-alice"]


def test_logout_revokes_the_refresh_token_and_forgets_it(signin_server, browser):
    assert run(*signin_server.login_args())[0] == ExitCode.OK

    code, out, _ = run("logout")

    assert code == ExitCode.OK
    assert "signed out (profile default): the refresh token is revoked" in out
    assert default_store().load("default") is None
    with pytest.raises(OAuthError, match="invalid_grant"):
        AuthServer(signin_server.url, CLIENT_ID).refresh("r-alice")
    with pytest.raises(NotSignedInError, match="outlast login"):
        StoredToken("default", default_store())()
    assert run("logout") == (ExitCode.OK, "not signed in (profile default)\n", "")


def test_a_revoked_sign_in_asks_for_a_new_login(signin_server):
    store = default_store()
    store.save("default", Credentials(jwt({"exp": 1}), "not-a-refresh-token", signin_server.url, CLIENT_ID))

    with pytest.raises(NotSignedInError, match="has ended"):
        StoredToken("default", store)()


def test_logout_with_the_sign_in_endpoint_down_forgets_here_and_says_what_remains():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{probe.getsockname()[1]}"
    default_store().save("default", Credentials(jwt({"exp": 1}), "r-alice", down, CLIENT_ID))

    code, _, err = run("logout")

    assert code == ExitCode.ERROR
    assert "stays valid until it expires" in err
    assert default_store().load("default") is None
