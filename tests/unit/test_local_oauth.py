"""Local mode's authorization endpoints (outlast/local/oauth.py): Cognito's shape and rules."""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.parse

import pytest

from outlast.auth.callbacks import CALLBACK_URLS
from outlast.local.oauth import LocalAuthorizationServer, PublicClient

pytestmark = pytest.mark.unit

CONSOLE = "http://127.0.0.1:9001/"
CLIENT = PublicClient("console-client", (CONSOLE,), (CONSOLE,), ("http://127.0.0.1:9001",))
CLI = PublicClient("cli-client", CALLBACK_URLS)
VERIFIER = "v" * 20 + "erifier-of-forty-three-characters-x"
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).decode().rstrip("=")
TOKENS = {"IdToken": "id.t.k", "AccessToken": "ac.c.s", "RefreshToken": "r", "ExpiresIn": 3600}


class SignIns:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def __call__(self, client_id: str, user: str, tenant: str | None) -> dict[str, object]:
        assert client_id in {CLIENT.client_id, CLI.client_id}
        self.calls.append((user, tenant))
        return TOKENS


def refreshes(client_id: str, refresh_token: str) -> dict[str, object]:
    """The user pool's REFRESH_TOKEN_AUTH: it knows the refresh token `r` only."""
    if refresh_token != "r":
        raise ValueError("NotAuthorizedException")
    return {"IdToken": f"id.{client_id}.new", "AccessToken": "ac.c.new", "ExpiresIn": 3600}


def server_of(sign_ins: SignIns | None = None) -> LocalAuthorizationServer:
    return LocalAuthorizationServer((CLIENT, CLI), sign_ins or SignIns(), refreshes)


def authorize_query(**changes: str) -> dict[str, str]:
    query = {
        "response_type": "code",
        "client_id": CLIENT.client_id,
        "redirect_uri": CONSOLE,
        "state": "st<ate>",
        "scope": "openid email profile",
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
    }
    return {**query, **changes}


def form(values: dict[str, str]) -> bytes:
    return urllib.parse.urlencode(values).encode()


def signed_in_code(server: LocalAuthorizationServer, user: str = "alice", tenant: str = "acme") -> str:
    answer = server.answer("POST", "/oauth2/authorize", "", {}, form({**authorize_query(), "username": user,
                                                                     "tenant": tenant}))  # fmt: skip
    assert answer is not None
    status, headers, _ = answer
    assert status == 302
    location = urllib.parse.urlsplit(headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == CONSOLE
    query = dict(urllib.parse.parse_qsl(location.query))
    assert query["state"] == "st<ate>"
    return query["code"]


def exchange(
    server: LocalAuthorizationServer, **changes: str
) -> tuple[int, dict[str, str], dict[str, object]]:
    values = {"grant_type": "authorization_code", "client_id": CLIENT.client_id, "redirect_uri": CONSOLE,
              "code_verifier": VERIFIER, **changes}  # fmt: skip
    headers = {"content-type": "application/x-www-form-urlencoded", "origin": "http://127.0.0.1:9001"}
    answer = server.answer("POST", "/oauth2/token", "", headers, form(values))
    assert answer is not None
    status, response_headers, body = answer
    return status, response_headers, json.loads(body)


def test_the_sign_in_form_is_labelled_and_carries_the_request_escaped() -> None:
    server = server_of()

    answer = server.answer("GET", "/oauth2/authorize", urllib.parse.urlencode(authorize_query()), {}, b"")

    assert answer is not None
    status, headers, body = answer
    page = body.decode()
    assert status == 200
    assert '<label for="username">' in page
    assert 'id="username"' in page
    assert '<label for="tenant">' in page
    assert 'id="tenant"' in page
    assert 'value="st&lt;ate&gt;"' in page
    assert "<script" not in page
    assert "form-action 'self' http://127.0.0.1:9001" in headers["Content-Security-Policy"]


@pytest.mark.parametrize(
    "changes", [{"client_id": "someone-else"}, {"redirect_uri": "https://evil.example/"}]
)
def test_an_unknown_client_or_redirect_is_refused_without_redirecting(changes: dict[str, str]) -> None:
    answer = server_of().answer(
        "GET", "/oauth2/authorize", urllib.parse.urlencode(authorize_query(**changes)), {}, b""
    )

    assert answer is not None
    assert answer[0] == 400
    assert "Location" not in answer[1]


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": "short"}, "invalid_request"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"scope": "email"}, "invalid_scope"),
    ],
)
def test_a_request_without_s256_pkce_goes_back_with_an_error(changes: dict[str, str], error: str) -> None:
    answer = server_of().answer(
        "GET", "/oauth2/authorize", urllib.parse.urlencode(authorize_query(**changes)), {}, b""
    )

    assert answer is not None
    status, headers, _ = answer
    assert status == 302
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(headers["Location"]).query))["error"] == error


def test_the_code_is_exchanged_once_for_tokens_in_cognitos_shape() -> None:
    sign_ins = SignIns()
    server = server_of(sign_ins)
    code = signed_in_code(server)

    status, headers, body = exchange(server, code=code)

    assert sign_ins.calls == [("alice", "acme")]
    assert status == 200
    assert body == {"id_token": "id.t.k", "access_token": "ac.c.s", "refresh_token": "r", "expires_in": 3600,
                    "token_type": "Bearer"}  # fmt: skip
    assert headers["Cache-Control"] == "no-store"
    assert headers["Access-Control-Allow-Origin"] == "http://127.0.0.1:9001"
    assert exchange(server, code=code)[:3:2] == (400, {"error": "invalid_grant"})


@pytest.mark.parametrize(
    "changes",
    [
        {"code_verifier": "w" * 43},
        {"redirect_uri": "http://127.0.0.1:9001/other"},
    ],
)
def test_a_wrong_verifier_or_redirect_uri_is_an_invalid_grant_and_spends_the_code(
    changes: dict[str, str],
) -> None:
    server = server_of()
    code = signed_in_code(server)

    assert exchange(server, code=code, **changes)[::2] == (400, {"error": "invalid_grant"})
    assert exchange(server, code=code)[::2] == (400, {"error": "invalid_grant"})


def test_other_grants_and_clients_are_refused() -> None:
    server = server_of()
    code = signed_in_code(server)

    assert exchange(server, code=code, grant_type="client_credentials")[::2] == (
        400,
        {"error": "unsupported_grant_type"},
    )
    assert exchange(server, code=code, client_id="other")[::2] == (400, {"error": "invalid_client"})


def test_the_token_endpoint_allows_the_console_origin_only() -> None:
    server = server_of()

    other = server.answer("OPTIONS", "/oauth2/token", "", {"origin": "https://evil.example"}, b"")
    mine = server.answer("OPTIONS", "/oauth2/token", "", {"origin": "http://127.0.0.1:9001"}, b"")

    assert other is not None
    assert "Access-Control-Allow-Origin" not in other[1]
    assert mine is not None
    assert mine[1]["Access-Control-Allow-Origin"] == "http://127.0.0.1:9001"


def test_a_bad_user_name_shows_the_form_again_and_signs_nobody_in() -> None:
    sign_ins = SignIns()
    server = server_of(sign_ins)

    answer = server.answer(
        "POST", "/oauth2/authorize", "", {}, form({**authorize_query(), "username": "a b"})
    )

    assert answer is not None
    assert answer[0] == 400
    assert 'role="alert"' in answer[2].decode()
    assert sign_ins.calls == []


def test_logout_goes_back_to_a_listed_url_only() -> None:
    server = server_of()
    listed = urllib.parse.urlencode({"client_id": CLIENT.client_id, "logout_uri": CONSOLE})
    other = urllib.parse.urlencode({"client_id": CLIENT.client_id, "logout_uri": "https://evil.example/"})

    assert server.answer("GET", "/logout", listed, {}, b"") == (
        302,
        {"Location": CONSOLE, "Cache-Control": "no-store"},
        b"",
    )
    answer = server.answer("GET", "/logout", other, {}, b"")
    assert answer is not None
    assert answer[0] == 400


def test_other_paths_are_not_its_own() -> None:
    assert server_of().answer("GET", "/v1/jobs", "", {}, b"") is None


def _post(server: LocalAuthorizationServer, path: str, values: dict[str, str]) -> tuple[int, bytes]:
    answer = server.answer(
        "POST", path, "", {"content-type": "application/x-www-form-urlencoded"}, form(values)
    )
    assert answer is not None
    return answer[0], answer[2]


def test_the_cli_client_signs_in_to_a_registered_loopback_port_only() -> None:
    server = server_of()
    query = authorize_query(client_id=CLI.client_id, redirect_uri=CALLBACK_URLS[1])

    answer = server.answer("GET", "/oauth2/authorize", urllib.parse.urlencode(query), {}, b"")
    other_port = server.answer(
        "GET",
        "/oauth2/authorize",
        urllib.parse.urlencode({**query, "redirect_uri": "http://127.0.0.1:1234/callback"}),
        {},
        b"",
    )

    assert answer is not None
    assert answer[0] == 200
    assert other_port is not None
    assert other_port[0] == 400


def test_a_refresh_token_gets_a_new_id_token_and_no_new_refresh_token() -> None:
    status, body = _post(
        server_of(),
        "/oauth2/token",
        {"grant_type": "refresh_token", "client_id": CLI.client_id, "refresh_token": "r"},
    )

    assert status == 200
    assert json.loads(body) == {
        "id_token": "id.cli-client.new",
        "access_token": "ac.c.new",
        "expires_in": 3600,
        "token_type": "Bearer",
    }


def test_a_revoked_or_unknown_refresh_token_is_an_invalid_grant() -> None:
    server = server_of()
    refresh = {"grant_type": "refresh_token", "client_id": CLI.client_id, "refresh_token": "r"}

    revoked = _post(server, "/oauth2/revoke", {"token": "r", "client_id": CLI.client_id})

    assert revoked == (200, b"")
    assert _post(server, "/oauth2/token", refresh) == (400, b'{"error": "invalid_grant"}')
    assert _post(server, "/oauth2/token", {**refresh, "refresh_token": "unknown"})[0] == 400


def test_revoke_needs_a_token_and_a_known_client() -> None:
    server = server_of()

    assert _post(server, "/oauth2/revoke", {"client_id": CLI.client_id}) == (
        400,
        b'{"error": "invalid_request"}',
    )
    assert _post(server, "/oauth2/revoke", {"token": "r", "client_id": "nobody"}) == (
        400,
        b'{"error": "invalid_client"}',
    )
