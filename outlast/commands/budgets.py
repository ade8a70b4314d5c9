"""`outlast budgets set | show`: tenants' monthly token budgets, for operators (AWS credentials, never
the API; `--local` for the local stack). See docs/runbook.md#budget-exhausted.

A tenant's own limit wins over the stage's `defaultMonthlyTokens`, from the tenant's next submit
on; `--unlimited` lifts it whatever the stage default, `--stage-default` drops the tenant's own.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from outlast.commands.dlq import EXIT_OK, UsageError, guarded, now
from outlast.operator.budgets import OperatorBudgets, TenantBudget
from outlast.operator.targets import Target, add_target_arguments, resolve
from outlast.operator.text import instant, table
from shared.budgets import UNLIMITED, period_end, period_of
from shared.clock import to_iso

# What a tenant can be (shared.identity: custom:tenant, or user:{sub} for a personal tenant).
_TENANT = re.compile(r"[A-Za-z0-9._:@+=-]{1,128}")
_PERIOD = re.compile(r"\d{4}-(0[1-9]|1[0-2])")

EPILOG = """\
exit codes:
  0    done
  2    usage error, no such target, or an AWS error (missing credentials or permissions)
  130  interrupted

Limits are in tokens per calendar month (UTC). `show` without --tenant scans the budgets table's
tenant items (every tenant with a limit or a counter); with --tenant it reads two items.
"""


def tenant_name(value: str) -> str:
    """A tenant as tokens carry it (`custom:tenant`, or `user:SUB`)."""
    if not _TENANT.fullmatch(value):
        raise argparse.ArgumentTypeError("a tenant is 1-128 of A-Z a-z 0-9 . _ : @ + = -")
    return value


def period_name(value: str) -> str:
    """A calendar month, YYYY-MM."""
    if not _PERIOD.fullmatch(value):
        raise argparse.ArgumentTypeError("a period is a month, YYYY-MM")
    return value


def token_count(value: str) -> int:
    """A positive number of tokens (`1000000`, `1_000_000` or `1,000,000`)."""
    digits = value.replace("_", "").replace(",", "")
    if not digits.isascii() or not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError("--monthly-tokens is a whole number of tokens, at least 1")
    return int(digits)


def register(commands: Any) -> None:
    """Add `budgets set` and `budgets show`."""
    group = commands.add_parser(
        "budgets", help="tenants' monthly token budgets (operators; AWS credentials, not the API)"
    ).add_subparsers(dest="budgets_command", required=True, metavar="COMMAND")

    setting = group.add_parser(
        "set",
        help="set a tenant's own monthly token limit",
        description="Set a tenant's monthly token limit; it applies from the tenant's next submit.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    setting.add_argument("--tenant", required=True, type=tenant_name, metavar="T", help="the tenant")
    limit = setting.add_mutually_exclusive_group(required=True)
    limit.add_argument(
        "--monthly-tokens", type=token_count, metavar="N", help="the limit, in tokens per month"
    )
    limit.add_argument("--unlimited", action="store_true", help="no limit, whatever the stage default")
    limit.add_argument(
        "--stage-default", action="store_true", help="drop the tenant's own limit: the stage default applies"
    )
    add_target_arguments(setting)
    setting.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    setting.set_defaults(run=guarded(_set))

    showing = group.add_parser(
        "show",
        help="a tenant's (or every tenant's) budget this month",
        description="Show limits, used, reserved and remaining tokens in a month (default: this one).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    showing.add_argument(
        "--tenant", type=tenant_name, metavar="T", help="only this tenant (two reads, no scan)"
    )
    showing.add_argument("--period", type=period_name, metavar="YYYY-MM", help="another month (UTC)")
    add_target_arguments(showing)
    showing.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    showing.set_defaults(run=guarded(_show))


def _budgets(target: Target) -> OperatorBudgets:
    if target.budgets is None:
        raise UsageError(f"{target.label} has no budgets table: deploy a version with token budgets")
    return target.budgets


def _set(arguments: argparse.Namespace) -> int:
    target = resolve(arguments)
    budgets = _budgets(target)
    monthly = (
        None if arguments.stage_default else UNLIMITED if arguments.unlimited else arguments.monthly_tokens
    )
    shown = budgets.set_limit(arguments.tenant, monthly, now())
    if arguments.json:
        print(json.dumps({"target": target.label, "budget": budget_document(shown)}, indent=2))
    else:
        print(f"{target.label}: tenant {shown.tenant} now has {_limit_text(shown)}, from its next submit")
        print(*format_budget(shown), sep="\n")
    return EXIT_OK


def _show(arguments: argparse.Namespace) -> int:
    target = resolve(arguments)
    budgets = _budgets(target)
    period = arguments.period or period_of(now())
    shown = [budgets.show(arguments.tenant, period)] if arguments.tenant else budgets.show_all(period)
    if arguments.json:
        document = {
            "target": target.label,
            "period": period,
            "stageDefaultTokens": budgets.default_monthly_tokens or None,
            "tenants": [budget_document(budget) for budget in shown],
        }
        print(json.dumps(document, indent=2))
        return EXIT_OK
    default = f"{budgets.default_monthly_tokens:,} tokens" if budgets.default_monthly_tokens else "no limit"
    print(f"{target.label}, {period} (resets {instant(period_end(period))}); stage default: {default}")
    if arguments.tenant:
        print(*format_budget(shown[0]), sep="\n")
    elif not shown:
        print("no tenant has a limit of its own or a counter yet", file=sys.stderr)
    else:
        print(*format_table(shown), sep="\n")
    return EXIT_OK


def _limit_text(budget: TenantBudget) -> str:
    source = "its own" if budget.configured_limit is not None else "the stage default"
    if budget.limit is None:
        return f"no limit ({source})"
    return f"a limit of {budget.limit:,} tokens a month ({source})"


def format_budget(budget: TenantBudget) -> list[str]:
    """One tenant, one period, for people."""
    remaining = "-" if budget.remaining is None else f"{budget.remaining:,}"
    return [
        f"  tenant     {budget.tenant}",
        f"  limit      {_limit_text(budget)}",
        f"  used       {budget.used:,}",
        f"  reserved   {budget.reserved:,}  (held by jobs not settled yet)",
        f"  remaining  {remaining}",
        f"  resets at  {instant(budget.resets_at)}",
    ]


def format_table(budgets: list[TenantBudget]) -> list[str]:
    """Every tenant, one line each."""
    rows = [
        [
            budget.tenant,
            "-" if budget.limit is None else f"{budget.limit:,}",
            "own" if budget.configured_limit is not None else "stage",
            f"{budget.used:,}",
            f"{budget.reserved:,}",
            "-" if budget.remaining is None else f"{budget.remaining:,}",
        ]
        for budget in budgets
    ]
    return table(["TENANT", "LIMIT", "FROM", "USED", "RESERVED", "REMAINING"], rows)


def budget_document(budget: TenantBudget) -> dict[str, Any]:
    """One tenant, one period, for scripts (the fields of GET /v1/budget, and the tenant's own limit)."""
    return {
        "tenant": budget.tenant,
        "period": budget.period,
        "limitTokens": budget.limit,
        "ownLimitTokens": budget.configured_limit,
        "usedTokens": budget.used,
        "reservedTokens": budget.reserved,
        "remainingTokens": budget.remaining,
        "resetsAt": to_iso(budget.resets_at),
    }
