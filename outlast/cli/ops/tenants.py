"""`outlast ops tenants set | show`: tenants' running caps (docs/runbook.md#noisy-tenants)."""

from __future__ import annotations

from typing import Any

import click

from outlast.cli.framework import Section, Verb
from outlast.cli.ops.common import AWS_ERROR, codes, json_flag, run, target_options
from outlast.cli.session import guarded

tenants = Section("tenants", help="Tenants' running caps: at most N of a tenant's jobs running at once.")
APPLIES = "A cap is copied onto each job at submit: a change applies to jobs submitted after it."


@tenants.command(
    "set",
    cls=Verb,
    exit_codes=codes(OK="the cap was set", ERROR=AWS_ERROR),
    epilog=APPLIES + " A tenant's own cap wins over the stage's maxRunningPerTenant.",
    examples=("outlast ops tenants set --tenant acme --max-running 20",),
)
@click.option("--tenant", required=True, metavar="T", help="the tenant (custom:tenant, or user:SUB)")
@click.option("--max-running", metavar="N", help="at most N of its jobs running at once")
@click.option("--uncapped", is_flag=True, help="no cap, whatever the stage default")
@click.option("--stage-default", is_flag=True, help="drop the tenant's own cap: the stage default applies")
@target_options
@json_flag
@guarded
def set_cap(**options: Any) -> int:
    """Set a tenant's running cap; it applies to the tenant's next submits."""
    return run("tenants", "set_cap", options)


@tenants.command(
    "show",
    cls=Verb,
    exit_codes=codes(OK="shown", ERROR=AWS_ERROR),
    epilog=APPLIES,
    examples=("outlast ops tenants show --tenant acme",),
)
@click.option("--tenant", required=True, metavar="T", help="the tenant")
@target_options
@json_flag
@guarded
def show(**options: Any) -> int:
    """Show a tenant's running cap (its own or the stage default)."""
    return run("tenants", "show", options)
