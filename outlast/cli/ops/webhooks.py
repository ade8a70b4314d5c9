"""`outlast ops webhooks ...`: endpoints and deliveries (docs/runbook.md#manage-webhook-endpoints)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from outlast.cli.framework import Section, Verb
from outlast.cli.ops.common import (
    AWS_ERROR,
    codes,
    hold_option,
    json_flag,
    max_messages_option,
    run,
    target_options,
)
from outlast.cli.session import guarded

DEFAULT_DELIVERIES = 20
NO_ENDPOINT = "no such endpoint"

webhooks = Section("webhooks", help="Webhook endpoints per tenant, their secrets and deliveries.")


def _endpoint_id[F: Callable[..., Any]](function: F) -> F:
    return click.argument("endpoint_id", metavar="ID")(function)


@webhooks.command(
    "add",
    cls=Verb,
    exit_codes=codes(OK="added", ERROR="the URL was refused, or " + AWS_ERROR),
    epilog="The URL must pass the egress guard (docs/webhooks.md): https, port 443 or 1024 and up, no "
    "user name or password, every address it resolves to public; on the local stack plain http and "
    "loopback receivers are allowed too. The signing secret is printed once, here.",
    examples=("outlast ops webhooks add --tenant acme --url https://hooks.acme.example/outlast",),
)
@click.option("--tenant", required=True, help="the tenant whose jobs it hears")
@click.option("--url", required=True, help="where to POST (https)")
@click.option(
    "--event", multiple=True, metavar="EVENT", help="job.succeeded, job.failed or job.canceled (default: all)"
)
@target_options
@json_flag
@guarded
def add(**options: Any) -> int:
    """Register a tenant's endpoint and print its signing secret once."""
    return run("webhooks", "add", options)


@webhooks.command("list", cls=Verb, exit_codes=codes(OK="listed", ERROR=AWS_ERROR))
@click.option("--tenant", help="only this tenant's")
@target_options
@json_flag
@guarded
def list_endpoints(**options: Any) -> int:
    """List endpoints (never their secrets)."""
    return run("webhooks", "list_endpoints", options)


@webhooks.command("remove", cls=Verb, exit_codes=codes(OK="removed", FAILED=NO_ENDPOINT, ERROR=AWS_ERROR))
@_endpoint_id
@target_options
@guarded
def remove(**options: Any) -> int:
    """Remove an endpoint (queued deliveries are dropped)."""
    return run("webhooks", "remove", options)


@webhooks.command("enable", cls=Verb, exit_codes=codes(OK="enabled", FAILED=NO_ENDPOINT, ERROR=AWS_ERROR))
@_endpoint_id
@target_options
@guarded
def enable(**options: Any) -> int:
    """Enable an endpoint again (after a 410 disabled it)."""
    return run("webhooks", "enable", options)


@webhooks.command(
    "rotate",
    cls=Verb,
    exit_codes=codes(
        OK="rotated: the new secret is printed once",
        FAILED="not rotated: an earlier overlap still runs (--force), or " + NO_ENDPOINT,
        ERROR=AWS_ERROR,
    ),
)
@_endpoint_id
@click.option("--force", is_flag=True, help="rotate even while an earlier overlap runs")
@target_options
@json_flag
@guarded
def rotate(**options: Any) -> int:
    """Make a new signing secret; the old one signs 24 h more."""
    return run("webhooks", "rotate", options)


@webhooks.command("deliveries", cls=Verb, exit_codes=codes(OK="listed", FAILED=NO_ENDPOINT, ERROR=AWS_ERROR))
@click.argument("endpoint_id", required=False, metavar="[ID]")
@click.option(
    "--limit", type=click.IntRange(min=1), default=DEFAULT_DELIVERIES, show_default=True, help="per endpoint"
)
@target_options
@json_flag
@guarded
def deliveries(**options: Any) -> int:
    """Recent deliveries and every attempt at them (one endpoint's, or all)."""
    return run("webhooks", "deliveries", options)


@webhooks.command(
    "redrive",
    cls=Verb,
    exit_codes=codes(
        OK="every selected message was handled as planned (none selected: nothing to do)",
        FAILED="some were kept or failed (--dry-run: as the run would exit)",
        ERROR=AWS_ERROR + " before anything changed",
        INTERRUPTED="interrupted: what was done is printed; every message not handled was released",
    ),
    epilog="Actions: redrive (endpoint enabled: back on the webhooks queue, same webhook-id), "
    "drop-delivered, drop-removed, keep-disabled (until `ops webhooks enable ID`), keep-unreadable.",
)
@click.option("--all", "all", is_flag=True, help="every message")
@click.option("--endpoint", multiple=True, metavar="ID", help="this endpoint's (repeatable)")
@click.option("--webhook-id", "webhook_id", multiple=True, metavar="ID", help="this delivery's (repeatable)")
@click.option("--dry-run", is_flag=True, help="print the plan and change nothing")
@hold_option
@max_messages_option
@target_options
@json_flag
@guarded
def redrive(**options: Any) -> int:
    """Send deliveries from the webhooks DLQ back."""
    return run("webhooks", "redrive", options)
