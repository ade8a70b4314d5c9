"""What every `outlast ops` command shares: the target options (the local stack, or a deployed
stack read with the operator's AWS credentials), and running a body from a checkout."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import click

from outlast.cli.checkout import use_checkout
from outlast.cli.console import Console
from outlast.cli.errors import ExitCode

DEFAULT_LOCAL_PORT = 8000
# What a DLQ read holds (outlast.operator.dlq's defaults; a test checks they agree).
DEFAULT_MAX_MESSAGES = 1000
DEFAULT_HOLD_SECONDS = 300
DEFAULT_STACK_NAME = "outlast"
AWS_ERROR = "usage error, no such target, or an AWS error (missing credentials or permissions)"


def target_options[F: Callable[..., Any]](function: F) -> F:
    """--local/--port, or --stack-name/--region/--profile (the operator's AWS credentials)."""
    for option in reversed(
        (
            click.option("--local", is_flag=True, help="act on the running local stack"),
            click.option(
                "--port",
                type=int,
                default=DEFAULT_LOCAL_PORT,
                show_default=True,
                help="with --local: its port",
            ),
            click.option(
                "--stack-name",
                metavar="NAME",
                help=f"the deployed CloudFormation stack (default {DEFAULT_STACK_NAME})",
            ),
            click.option("--region", help="AWS region (default: your AWS configuration)"),
            click.option("--profile", metavar="NAME", help="AWS profile (default: your AWS configuration)"),
        )
    ):
        function = option(function)
    return function


def json_flag[F: Callable[..., Any]](function: F) -> F:
    """--json: the command's document on stdout, its human lines on stderr."""
    return click.option("--json", "json_mode", is_flag=True, help="print one JSON document on stdout")(
        function
    )


def run(module: str, body: str, options: dict[str, Any]) -> int:
    """Run `outlast.operator.commands.<module>.<body>` with the options, from a checkout."""
    use_checkout("`outlast ops`")
    guard = importlib.import_module("outlast.operator.commands.guard")
    implementation = importlib.import_module(f"outlast.operator.commands.{module}")
    console = Console(bool(options.pop("json_mode", False)))
    code: int = guard.run(getattr(implementation, body), SimpleNamespace(**options), console)
    return code


def codes(**meanings: str) -> dict[ExitCode, str]:
    """Exit codes by name: codes(OK="...", ERROR="...")."""
    return {ExitCode[name]: text for name, text in meanings.items()}


def max_messages_option[F: Callable[..., Any]](function: F) -> F:
    """--max-messages: how much of a DLQ one run reads."""
    return click.option(
        "--max-messages",
        type=click.IntRange(min=1),
        default=DEFAULT_MAX_MESSAGES,
        show_default=True,
        metavar="N",
        help="read at most this many DLQ messages; rerun for the rest",
    )(function)


def hold_option[F: Callable[..., Any]](function: F) -> F:
    """--hold-seconds: how long a redrive keeps the DLQ messages it read hidden."""
    return click.option(
        "--hold-seconds",
        type=click.IntRange(min=1),
        default=DEFAULT_HOLD_SECONDS,
        show_default=True,
        metavar="S",
        help="how long the run keeps the messages it read hidden",
    )(function)
