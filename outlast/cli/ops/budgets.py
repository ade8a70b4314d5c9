"""`outlast ops budgets set | show`: tenants' monthly token budgets (docs/runbook.md#budget-exhausted)."""

from __future__ import annotations

from typing import Any

import click

from outlast.cli.framework import Section, Verb
from outlast.cli.ops.common import AWS_ERROR, codes, json_flag, run, target_options
from outlast.cli.session import guarded

budgets = Section("budgets", help="Tenants' monthly token budgets: set a limit, show usage.")
UNITS = "Limits are in tokens per calendar month (UTC)."


@budgets.command(
    "set",
    cls=Verb,
    exit_codes=codes(OK="the limit was set", ERROR=AWS_ERROR),
    epilog=UNITS + " A tenant's own limit wins over the stage's defaultMonthlyTokens from its next submit.",
    examples=("outlast ops budgets set --tenant acme --monthly-tokens 5,000,000",),
)
@click.option("--tenant", required=True, metavar="T", help="the tenant (custom:tenant, or user:SUB)")
@click.option("--monthly-tokens", metavar="N", help="the limit, in tokens per month")
@click.option("--unlimited", is_flag=True, help="no limit, whatever the stage default")
@click.option("--stage-default", is_flag=True, help="drop the tenant's own limit: the stage default applies")
@target_options
@json_flag
@guarded
def set_limit(**options: Any) -> int:
    """Set a tenant's monthly token limit; it applies from the tenant's next submit."""
    return run("budgets", "set_limit", options)


@budgets.command(
    "show",
    cls=Verb,
    exit_codes=codes(OK="shown", ERROR=AWS_ERROR),
    epilog=UNITS + " Without --tenant it scans the budgets table's tenant items; with it, two reads.",
)
@click.option("--tenant", metavar="T", help="only this tenant (two reads, no scan)")
@click.option("--period", metavar="YYYY-MM", help="another month (UTC)")
@target_options
@json_flag
@guarded
def show(**options: Any) -> int:
    """Show limits, used, reserved and remaining tokens in a month (default: this one)."""
    return run("budgets", "show", options)
