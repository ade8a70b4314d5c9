"""`outlast ops budgets set | show`: tenants' monthly token budgets, for operators (AWS credentials, never
the API; `--local` for the local stack). See docs/runbook.md#budget-exhausted.

A tenant's own limit wins over the stage's `defaultMonthlyTokens`, from the tenant's next submit
on; `--unlimited` lifts it whatever the stage default, `--stage-default` drops the tenant's own.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

from outlast.cli.console import Console
from outlast.cli.errors import CliError, ExitCode
from outlast.operator.budgets import OperatorBudgets, TenantBudget
from outlast.operator.commands.dlq import now
from outlast.operator.targets import Target, resolve
from outlast.operator.text import instant
from shared.budgets import UNLIMITED, period_end, period_of
from shared.clock import to_iso

# What a tenant can be (shared.identity: custom:tenant, or user:{sub} for a personal tenant).
_TENANT = re.compile(r"[A-Za-z0-9._:@+=-]{1,128}")
_PERIOD = re.compile(r"\d{4}-(0[1-9]|1[0-2])")


def tenant_name(value: str | None) -> str | None:
    """A tenant as tokens carry it (`custom:tenant`, or `user:SUB`)."""
    if value is not None and not _TENANT.fullmatch(value):
        raise CliError("a tenant is 1-128 of A-Z a-z 0-9 . _ : @ + = -")
    return value


def period_name(value: str | None) -> str | None:
    """A calendar month, YYYY-MM."""
    if value is not None and not _PERIOD.fullmatch(value):
        raise CliError("a period is a month, YYYY-MM")
    return value


def token_count(value: str) -> int:
    """A positive number of tokens (`1000000`, `1_000_000` or `1,000,000`)."""
    digits = value.replace("_", "").replace(",", "")
    if not digits.isascii() or not digits.isdigit() or int(digits) < 1:
        raise CliError("--monthly-tokens is a whole number of tokens, at least 1")
    return int(digits)


def _budgets(target: Target) -> OperatorBudgets:
    if target.budgets is None:
        raise CliError(f"{target.label} has no budgets table: deploy a version with token budgets")
    return target.budgets


def set_limit(arguments: SimpleNamespace, console: Console) -> int:
    """`ops budgets set`: a tenant's own limit (or none, or the stage default), from its next submit."""
    chosen = [arguments.monthly_tokens is not None, arguments.unlimited, arguments.stage_default]
    if sum(chosen) != 1:
        raise CliError("say one limit: --monthly-tokens N, --unlimited or --stage-default")
    tenant = tenant_name(arguments.tenant)
    monthly = (
        None
        if arguments.stage_default
        else UNLIMITED
        if arguments.unlimited
        else token_count(arguments.monthly_tokens)
    )
    target = resolve(arguments)
    shown = _budgets(target).set_limit(str(tenant), monthly, now())
    human = "\n".join(
        [
            f"{target.label}: tenant {shown.tenant} now has {_limit_text(shown)}, from its next submit",
            *format_budget(shown),
        ]
    )
    console.show(human, {"target": target.label, "budget": budget_document(shown)})
    return ExitCode.OK


def show(arguments: SimpleNamespace, console: Console) -> int:
    """`ops budgets show`: one tenant's budget (two reads), or every tenant's (a scan)."""
    tenant, period = tenant_name(arguments.tenant), period_name(arguments.period)
    target = resolve(arguments)
    budgets = _budgets(target)
    period = period or period_of(now())
    shown = [budgets.show(tenant, period)] if tenant else budgets.show_all(period)
    if console.json_mode:
        document = {
            "target": target.label,
            "period": period,
            "stageDefaultTokens": budgets.default_monthly_tokens or None,
            "tenants": [budget_document(budget) for budget in shown],
        }
        console.show(None, document)
        return ExitCode.OK
    default = f"{budgets.default_monthly_tokens:,} tokens" if budgets.default_monthly_tokens else "no limit"
    console.line(f"{target.label}, {period} (resets {instant(period_end(period))}); stage default: {default}")
    if tenant:
        console.show("\n".join(format_budget(shown[0])), None)
    elif not shown:
        console.note("no tenant has a limit of its own or a counter yet")
    else:
        console.table(TABLE_COLUMNS, [table_row(budget) for budget in shown])
    return ExitCode.OK


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


TABLE_COLUMNS = ("TENANT", "LIMIT", "FROM", "USED", "RESERVED", "REMAINING")


def table_row(budget: TenantBudget) -> list[str]:
    """One tenant as a row of TABLE_COLUMNS."""
    return [
        budget.tenant,
        "-" if budget.limit is None else f"{budget.limit:,}",
        "own" if budget.configured_limit is not None else "stage",
        f"{budget.used:,}",
        f"{budget.reserved:,}",
        "-" if budget.remaining is None else f"{budget.remaining:,}",
    ]


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
