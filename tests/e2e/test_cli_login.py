"""`outlast login` against the whole local stack, as a new user meets it: the local front's
sign-in form (the browser is played by the test), then submit and wait with no $OUTLAST_TOKEN,
an expired ID token renewed without a prompt, and logout revoking the sign-in."""

from __future__ import annotations

import base64
import json
import time
import webbrowser

import pytest

from outlast.auth.store import default_store
from outlast.auth.tokens import expires_at, unverified_claims
from outlast.cli.errors import ExitCode
from tests.support.cli import run
from tests.support.local_stack import RunningStack
from tests.support.signin import Browser


def _expired_copy(token: str) -> str:
    """The same token with `exp` in the past (its signature no longer matches: the API would refuse it)."""
    header, _, signature = token.split(".")
    claims = {**unverified_claims(token), "exp": int(time.time()) - 60}
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{header}.{payload}.{signature}"


def test_a_new_user_signs_in_submits_and_waits_without_a_token_variable(
    stack: RunningStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a person with no token in the environment, signing in through the local front's form
    monkeypatch.delenv("OUTLAST_TOKEN", raising=False)
    monkeypatch.delenv("OUTLAST_API_URL", raising=False)
    person = Browser("login-e2e-alice", "login-e2e")
    monkeypatch.setattr(webbrowser, "open", person.open)

    code, out, err = run("login", "--local", "--port", str(stack.port))

    assert code == ExitCode.OK, err
    assert person.callback_statuses == [200]
    assert f"signed in as login-e2e-alice, tenant login-e2e, to {stack.url}" in out
    signed_in = default_store().load("default")
    assert signed_in is not None
    assert signed_in.client_id == stack.state["cliClientId"]
    assert unverified_claims(signed_in.id_token)["aud"] == stack.state["cliClientId"]

    # When they submit and wait, with nothing but the sign-in
    code, out, err = run("submit", "summarize", "--text", "A short report. Revenue rose.", "--wait")

    # Then the API took the CLI client's ID token and the job ran to its result
    assert code == ExitCode.OK, err
    assert out.strip()

    # And when the ID token has expired, the next command renews it without a prompt
    store = default_store()
    current = store.load("default")
    assert current is not None
    store.save(
        "default", current.__class__(_expired_copy(current.id_token), *list(vars(current).values())[1:])
    )
    code, out, err = run("list", "--json")
    assert code == ExitCode.OK, err
    assert json.loads(out)["items"]
    renewed = store.load("default")
    assert renewed is not None
    assert expires_at(renewed.id_token) > time.time()
    assert renewed.refresh_token == signed_in.refresh_token

    # And logout revokes the sign-in: the next command asks to sign in again
    assert run("logout")[0] == ExitCode.OK
    code, _, err = run("list")
    assert code == ExitCode.ERROR
    assert "outlast login" in err


def test_local_token_prints_one_id_token_for_scripts(stack: RunningStack) -> None:
    code, out, _ = run("local", "token", "--user", "login-e2e-bob", "--port", str(stack.port))

    assert code == ExitCode.OK
    (token,) = out.split()
    assert unverified_claims(token)["cognito:username"] == "login-e2e-bob"
