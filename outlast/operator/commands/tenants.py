"""`outlast ops tenants set | show`: tenants' running caps, for operators (AWS credentials, never the
API; `--local` for the local stack). See docs/runbook.md#noisy-tenants.

A tenant's own cap wins over the stage's `maxRunningPerTenant` for jobs submitted from then on
(the cap is copied onto each job at submit); `--uncapped` lifts it whatever the stage default,
`--stage-default` drops the tenant's own.
"""

from __future__ import annotations

from types import SimpleNamespace

from outlast.cli.console import Console
from outlast.cli.errors import CliError, ExitCode
from outlast.operator.commands.budgets import tenant_name
from outlast.operator.commands.dlq import now
from outlast.operator.targets import Target, resolve
from outlast.operator.tenants import OperatorTenants, TenantCap

_MAX_CAP = 10_000


def cap_count(value: str) -> int:
    """A positive number of jobs running at once."""
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= _MAX_CAP:
        raise CliError(f"--max-running is a whole number of jobs, 1 to {_MAX_CAP:,}")
    return int(value)


def _tenants(target: Target) -> OperatorTenants:
    if target.tenants is None:
        raise CliError(f"{target.label} has no budgets table: deploy a version with running caps")
    return target.tenants


def _cap_text(cap: TenantCap) -> str:
    source = "its own" if cap.configured is not None else "the stage default"
    if cap.effective == 0:
        return f"no running cap ({source})"
    return f"at most {cap.effective:,} jobs running at once ({source})"


def _document(cap: TenantCap) -> dict[str, object]:
    return {"tenant": cap.tenant, "maxRunning": cap.effective, "own": cap.configured is not None}


def set_cap(arguments: SimpleNamespace, console: Console) -> int:
    """`ops tenants set`: a tenant's own running cap (or none, or the stage default)."""
    chosen = [arguments.max_running is not None, arguments.uncapped, arguments.stage_default]
    if sum(chosen) != 1:
        raise CliError("say one cap: --max-running N, --uncapped or --stage-default")
    tenant = str(tenant_name(arguments.tenant))
    cap = None if arguments.stage_default else 0 if arguments.uncapped else cap_count(arguments.max_running)
    target = resolve(arguments)
    shown = _tenants(target).set_max_running(tenant, cap, now())
    human = (
        f"{target.label}: tenant {shown.tenant} now has {_cap_text(shown)}, for jobs submitted from now on"
    )
    console.show(human, {"target": target.label, "tenant": _document(shown)})
    return ExitCode.OK


def show(arguments: SimpleNamespace, console: Console) -> int:
    """`ops tenants show`: one tenant's running cap, and the stage default."""
    tenant = str(tenant_name(arguments.tenant))
    target = resolve(arguments)
    tenants = _tenants(target)
    shown = tenants.show(tenant)
    default = tenants.default_max_running
    human = "\n".join(
        [
            f"{target.label}: stage default {default:,} running"
            if default
            else f"{target.label}: no stage cap",
            f"  tenant       {shown.tenant}",
            f"  running cap  {_cap_text(shown)}",
        ]
    )
    console.show(human, {"target": target.label, "stageDefault": default or None, "tenant": _document(shown)})
    return ExitCode.OK
