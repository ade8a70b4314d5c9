"""`outlast login` and `outlast logout` (DESIGN.md, "The command line").

login: authorization code + PKCE over a loopback redirect (outlast.auth), against Cognito managed
login in AWS and the local front's /oauth2/* locally; the profile it signed in with is written to
the config file, the tokens to the OS keyring or an owner-only file. logout: revoke the refresh
token (`/oauth2/revoke`), then forget the tokens.
"""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from outlast.api.http import TransportError
from outlast.auth.login import sign_in
from outlast.auth.oauth import AuthServer, OAuthError
from outlast.auth.profiles import (
    Profile,
    from_local_state,
    from_outputs_file,
    from_stack,
    load_profile,
    profile_name,
    save_profile,
)
from outlast.auth.store import Credentials, default_store
from outlast.auth.tokens import unverified_claims
from outlast.cli.checkout import use_checkout
from outlast.cli.console import Console
from outlast.cli.errors import CliError, ExitCode
from outlast.cli.framework import Verb
from outlast.cli.session import guarded

SECTION = "ACCOUNT COMMANDS"
DEFAULT_LOCAL_PORT = 8000


def _profile(
    name: str,
    *,
    local: bool,
    port: int,
    outputs: Path | None,
    stack: str | None,
    region: str | None,
    aws_profile: str | None,
    urls: tuple[str | None, str | None, str | None],
) -> Profile:
    api_url, auth_url, client_id = urls
    sources = [local, outputs is not None, stack is not None and outputs is None, any(urls)]
    if sum(sources) > 1:
        raise click.UsageError(
            "name the stage one way: --local, --outputs FILE, --stack NAME, or the three URLs"
        )
    if local:
        use_checkout("`outlast login --local`")
        from outlast.local.stack import read_state  # noqa: PLC0415 - local mode, from a checkout

        try:
            return from_local_state(name, read_state(port))
        except FileNotFoundError as error:
            raise CliError(str(error)) from None
    if outputs is not None:
        return from_outputs_file(name, outputs, stack)
    if stack is not None:
        return from_stack(name, stack, region, aws_profile)
    if any(urls):
        if not all(urls):
            raise click.UsageError("--api-url, --auth-url and --client-id go together")
        return Profile(name, str(api_url), str(auth_url), str(client_id))
    found = load_profile(name)
    if found is None:
        raise CliError(
            f"no profile {name!r} yet: name the stage once with --outputs cdk-outputs.json, --stack NAME "
            "(AWS credentials), --local, or --api-url/--auth-url/--client-id"
        )
    return found


@click.command(
    "login",
    cls=Verb,
    section=SECTION,
    exit_codes={
        ExitCode.OK: "signed in",
        ExitCode.ERROR: "usage error, no such stage, or the sign-in was refused, timed out or failed",
    },
    examples=(
        "outlast login --outputs cdk-outputs.json   # after `cdk deploy --outputs-file cdk-outputs.json`",
        "outlast login --stack outlast --region eu-west-1",
        "outlast login --local                      # the stack `outlast local up` runs",
        "outlast login                              # again, on the profile already written",
    ),
)
@click.option(
    "--profile",
    metavar="NAME",
    help="the profile to sign in and write (default: $OUTLAST_PROFILE, else `default`)",
)
@click.option("--local", is_flag=True, help="the running local stack (`outlast local up`)")
@click.option(
    "--port", type=int, default=DEFAULT_LOCAL_PORT, show_default=True, help="with --local: its port"
)
@click.option(
    "--outputs", type=click.Path(path_type=Path, dir_okay=False), help="a `cdk deploy --outputs-file` file"
)
@click.option(
    "--stack",
    metavar="NAME",
    help="the deployed stack (read with your AWS credentials; with --outputs: which one)",
)
@click.option("--region", help="with --stack: its AWS region")
@click.option("--aws-profile", metavar="NAME", help="with --stack: the AWS profile to read it with")
@click.option("--api-url", metavar="URL", help="the API's URL (the stack's ApiUrl output)")
@click.option("--auth-url", metavar="URL", help="the user pool domain (the AuthDomainUrl output)")
@click.option("--client-id", metavar="ID", help="the CLI's app client (the CliClientId output)")
@click.option("--no-browser", is_flag=True, help="print the sign-in URL instead of opening a browser")
@guarded
def login(
    *,
    profile: str | None,
    local: bool,
    port: int,
    outputs: Path | None,
    stack: str | None,
    region: str | None,
    aws_profile: str | None,
    api_url: str | None,
    auth_url: str | None,
    client_id: str | None,
    no_browser: bool,
) -> int:
    """Sign in through your browser.

    The CLI keeps the sign-in (30 days) and renews its ID token itself.
    """
    console = Console(json_mode=False)
    name = profile_name(profile)
    stage = _profile(
        name,
        local=local,
        port=port,
        outputs=outputs,
        stack=stack,
        region=region,
        aws_profile=aws_profile,
        urls=(api_url, auth_url, client_id),
    )
    server = AuthServer(stage.auth_url, stage.client_id)

    def show(url: str) -> None:
        console.note(f"sign in at this URL (it opens in your browser unless --no-browser):\n  {url}")
        if not no_browser:
            webbrowser.open(url)
        console.note("waiting for the browser to come back...")

    tokens = sign_in(server, show)
    if tokens.refresh_token is None:
        raise CliError("the sign-in returned no refresh token: is the client the CLI's app client?")
    store = default_store()
    store.save(name, Credentials(tokens.id_token, tokens.refresh_token, stage.auth_url, stage.client_id))
    save_profile(stage)
    claims = unverified_claims(tokens.id_token)
    who = claims.get("cognito:username") or claims.get("sub") or "?"
    tenant = claims.get("custom:tenant") or f"user:{claims.get('sub', '?')} (your own)"
    console.line(f"signed in as {who}, tenant {tenant}, to {stage.api_url} (profile {name})")
    console.note(f"the sign-in is kept in {store.where}; `outlast logout` ends it")
    return ExitCode.OK


@click.command(
    "logout",
    cls=Verb,
    section=SECTION,
    exit_codes={
        ExitCode.OK: "signed out (the refresh token revoked and forgotten), or not signed in",
        ExitCode.ERROR: "the revocation failed: the tokens were forgotten here, but stay valid until "
        "they expire",
    },
)
@click.option(
    "--profile", metavar="NAME", help="the profile to sign out (default: $OUTLAST_PROFILE, else `default`)"
)
@guarded
def logout(profile: str | None) -> int:
    """Sign out.

    Revokes the refresh token, then forgets the tokens.
    """
    console = Console(json_mode=False)
    name = profile_name(profile)
    store = default_store()
    credentials = store.load(name)
    if credentials is None:
        console.line(f"not signed in (profile {name})")
        return ExitCode.OK
    failure: str | None = None
    try:
        AuthServer(credentials.auth_url, credentials.client_id).revoke(credentials.refresh_token)
    except (OAuthError, TransportError) as error:
        failure = str(error)
    store.delete(name)
    if failure is not None:
        console.note(
            f"error: the refresh token could not be revoked ({failure}); it is forgotten here but stays "
            "valid until it expires (30 days)"
        )
        return ExitCode.ERROR
    console.line(f"signed out (profile {name}): the refresh token is revoked")
    return ExitCode.OK
