"""What the client commands accept from the user before any request: the token and the API URL.

A malformed token or URL must end as a usage error (exit 2) with a message, never a traceback,
and the message must never quote the token. Sockets are blocked here, so nothing may be sent.
"""

from __future__ import annotations

import time

import pytest

from outlast.api.http import ApiUnreachableError, HttpApi
from outlast.cli.errors import ExitCode
from tests.support.cli import run

JOB_ID = "0b7f3c1e-8a4d-4e2b-9c6f-1d2e3f4a5b6c"
API_URL = "http://127.0.0.1:8000"
SECRET = "eyJzZWNyZXQ"  # the part of each bad token that must never be shown
BAD_TOKENS = [
    f"{SECRET}\nX-Injected: 1",
    f"{SECRET}\r\nX-Injected: 1",
    f"{SECRET} two-words",
    f"{SECRET}\tx",
    f"{SECRET}\x7f",
    f"{SECRET}\u20ac",  # not latin-1: http.client cannot even encode the header
    f"{SECRET}\u00e9",  # latin-1, but no token is
]


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    # Fault injection: a usage error must never be retried, so no command here may sleep.
    requested: list[float] = []
    monkeypatch.setattr(time, "sleep", requested.append)
    return requested


@pytest.mark.parametrize("token", BAD_TOKENS)
def test_a_malformed_token_is_a_usage_error_that_never_shows_it(capsys, monkeypatch, slept, token):
    monkeypatch.setenv("OUTLAST_TOKEN", token)

    code, out, err = run("status", JOB_ID, "--api-url", API_URL)

    assert code == ExitCode.ERROR
    assert "$OUTLAST_TOKEN" in err
    assert SECRET not in out + err
    assert not slept


@pytest.mark.parametrize("token", BAD_TOKENS)
def test_the_client_refuses_a_malformed_token_without_quoting_it(token):
    with pytest.raises(ValueError, match="token") as refused:
        HttpApi(API_URL, token)

    assert SECRET not in str(refused.value)


def test_a_header_http_cannot_carry_fails_without_a_traceback_or_its_value():
    # The backstop behind the checks: the idempotency key is checked by argparse, not the client.
    client = HttpApi(API_URL, "header.payload.signature")

    with pytest.raises(ApiUnreachableError) as refused:
        client.submit({"operation": "summarize", "input": {"text": "t"}}, f"{SECRET}\nX-Injected: 1")

    assert SECRET not in str(refused.value)


BAD_URLS = [
    "http://a..b/",
    "http://127.0.0.1:abc",
    "http://127.0.0.1:99999",
    "http://:8000",
    "http://" + "x" * 64 + ".example.com",
    "http://api.example.com/with space",
    "http://api.example.com/caf\u00e9",
    "http://api.example.com/?query",
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_the_client_refuses_an_api_url_it_could_not_reach(url):
    with pytest.raises(ValueError, match="API URL"):
        HttpApi(url, "token")


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_bad_api_url_is_a_usage_error_not_a_lost_connection(capsys, monkeypatch, slept, url):
    monkeypatch.setenv("OUTLAST_TOKEN", "header.payload.signature")

    code, out, err = run("submit", "summarize", "--text", "t", "--api-url", url)

    assert code == ExitCode.ERROR
    assert out == ""
    assert "error: API URL" in err
    assert "may or may not exist" not in err
    assert not slept


def test_credentials_in_the_api_url_are_refused_without_being_shown():
    with pytest.raises(ValueError, match="API URL") as refused:
        HttpApi("https://user:hunter2@api.example.com", "token")

    assert "hunter2" not in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://abc.execute-api.eu-west-1.amazonaws.com/",
        "http://[::1]:8000",
        "http://localhost:8000/prefix/",
        "https://b\u00fccher.example",
    ],
)
def test_usual_api_urls_are_accepted(url):
    assert HttpApi(url, "header.payload.signature").api_url == url.rstrip("/")
