"""What a user command talks to: the API URL and the bearer token, resolved the same way for
every command, and the guard that turns an expected failure into a message and an exit code.

The API URL and token are resolved as outlast.connection says (--api-url, --profile and
--token-env feed it). A token never comes from the command line: argv lands in shell history
and `ps`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import click

from outlast.api.http import (
    ApiError,
    ApiUnreachableError,
    ConnectionLostError,
    HttpApi,
    UnexpectedAnswerError,
)
from outlast.auth.loopback import SignInError
from outlast.auth.oauth import OAuthError
from outlast.auth.profiles import ProfileError
from outlast.auth.store import CredentialsError
from outlast.auth.tokens import TOKEN_ENV, NotSignedInError
from outlast.cli.console import Console
from outlast.cli.errors import CliError, ExitCode
from outlast.cli.formats import format_api_error, is_loopback
from outlast.connection import API_URL_ENV, DEFAULT_API_URL, BadTokenError, resolve
from outlast.follow import Follower
from outlast.retry import WaitTimeoutError, with_retries


@dataclass(frozen=True)
class Session:
    """One command's API and console."""

    api: HttpApi
    console: Console

    @property
    def follower(self) -> Follower:
        """Follows jobs through this API, telling the person on stderr."""
        return Follower(self.api, self.console.note)

    def call[T](self, call: Callable[[], T], what: str, deadline: float | None = None) -> T:
        """An idempotent call under the retry policy, each retry said on stderr."""
        return with_retries(call, what, notify=self.console.note, deadline=deadline)


def _variable_name(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if (
        not value
        or not (value[0].isalpha() or value[0] == "_")
        or not all(c.isalnum() or c == "_" for c in value)
    ):
        # Never echo the value: a pasted token lands here more often than a name.
        raise click.BadParameter("must name an environment variable (letters, digits, _)")
    return value


def _refuse_token(_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        raise click.UsageError(
            f"the token is read from ${TOKEN_ENV} (or the variable --token-env names), not from argv"
        )


def api_options[F: Callable[..., Any]](function: F) -> F:
    """--api-url, --profile, --token-env (and a hidden --token that says why it does not exist)."""
    for option in reversed(
        (
            click.option(
                "--api-url",
                metavar="URL",
                help=f"the API (default: ${API_URL_ENV}, the profile's, else {DEFAULT_API_URL})",
            ),
            click.option(
                "--profile",
                metavar="NAME",
                help="the signed-in profile to use (default: $OUTLAST_PROFILE, else `default`)",
            ),
            click.option(
                "--token-env",
                default=TOKEN_ENV,
                show_default=True,
                metavar="NAME",
                callback=_variable_name,
                help="variable holding an ID token; when it is set, it wins over the sign-in",
            ),
            click.option("--token", hidden=True, expose_value=False, callback=_refuse_token, is_eager=True),
        )
    ):
        function = option(function)
    return function


def json_option[F: Callable[..., Any]](function: F) -> F:
    """--json: stdout holds exactly one JSON document; messages go to stderr."""
    return click.option("--json", "json_mode", is_flag=True, help="print the result as JSON on stdout")(
        function
    )


def open_session(console: Console, api_url: str | None, profile: str | None, token_env: str) -> Session:
    """The API and token this command uses (CliError when there is no token to use)."""
    try:
        connection = resolve(api_url, profile=profile, token_env=token_env)
        api = HttpApi(connection.api_url, connection.token)
    except (BadTokenError, NotSignedInError) as error:
        raise CliError(str(error)) from None
    except ValueError as error:  # the API URL
        raise CliError(str(error)) from None
    if urlsplit(api.api_url).scheme == "http" and not is_loopback(api.api_url):
        console.note(f"warning: sending the token over plain http to {api.api_url}")
    return Session(api, console)


def report(console: Console, error: BaseException) -> ExitCode:
    """Say what went wrong on stderr and pick the exit code; re-raise what is not expected."""
    match error:
        case CliError():
            console.note(f"error: {error}")
            return error.code
        case ApiError():
            for line in format_api_error(error):
                console.note(line)
        case ApiUnreachableError():
            hint = "is `outlast local up` running?" if is_loopback(error.url) else "check --api-url"
            console.note(f"error: cannot reach {error.url} ({error.reason}): {hint}")
        case ConnectionLostError():
            console.note(f"error: lost the connection to {error.url} ({error.reason})")
        case OAuthError():
            console.note(f"error: the sign-in endpoint refused: {error}")
        case (
            UnexpectedAnswerError() | ProfileError() | NotSignedInError() | CredentialsError() | SignInError()
        ):
            console.note(f"error: {error}")
        case WaitTimeoutError():
            console.note(f"timed out: {error}")
            return ExitCode.STILL_RUNNING
        case KeyboardInterrupt():
            console.note("interrupted")
            return ExitCode.INTERRUPTED
        case _:
            raise error
    return ExitCode.ERROR


EXPECTED = (
    CliError,
    ApiError,
    ApiUnreachableError,
    ConnectionLostError,
    OAuthError,
    UnexpectedAnswerError,
    ProfileError,
    NotSignedInError,
    CredentialsError,
    SignInError,
    WaitTimeoutError,
    KeyboardInterrupt,
)


def guarded[**P](command: Callable[P, int]) -> Callable[P, None]:
    """Run a command body that returns an exit code; expected failures become a message and a code."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        console = Console(json_mode=bool(kwargs.get("json_mode", False)), out=sys.stdout, err=sys.stderr)
        try:
            code = command(*args, **kwargs)
        except EXPECTED as error:
            code = report(console, error)
        click.get_current_context().exit(int(code))

    return run
