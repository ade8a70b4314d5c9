"""The local stack a chaos run drives: one it starts itself (chaos on, fast timings) or a running one."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from outlast.chaos.spec import ChaosSpec, ChaosState
from outlast.local.process import free_port, interrupt, start_until_ready
from outlast.local.stack import log_dir, read_state
from outlast.local.synth import PROJECT_ROOT

# Short leases and grace periods, as the end-to-end tests use, so that recoveries take seconds.
# And a token budget for every tenant (DESIGN.md, "Token budgets"), far more than a run spends, so
# every job reserves and settles and no job is refused: the run then checks the budgets' drift.
CHAOS_MONTHLY_TOKENS = 1_000_000_000
FAST_CONTEXT = {
    "leaseSeconds": "5",
    "heartbeatSeconds": "1",
    "dispatchGraceSeconds": "6",
    "sweepLookSeconds": "2",
    "releaseMarginSeconds": "5",
    "defaultMonthlyTokens": str(CHAOS_MONTHLY_TOKENS),
}
# Chaos runs with a running cap on every tenant (DESIGN.md, "Fairness between tenants"), so its
# faults also hit slots being taken, extended and released, and claims deferred for want of one.
CHAOS_MAX_RUNNING_PER_TENANT = 4
CHAOS_CONTEXT = {**FAST_CONTEXT, "maxRunningPerTenant": str(CHAOS_MAX_RUNNING_PER_TENANT)}
SCHEDULE_SECONDS = 2
START_TIMEOUT_SECONDS = 300  # a first synth plus cold processes on a busy two-core machine


@dataclass
class Target:
    """Where the stack's pieces are, from its state file."""

    state: dict[str, Any]
    chaos: ChaosState | None

    @property
    def api_url(self) -> str:
        """The HTTP API's base URL."""
        return str(self.state["apiUrl"])

    @property
    def model_url(self) -> str:
        """The local model server's root (its `/_calls` log lives there)."""
        return str(self.state["modelUrl"]).removesuffix("/v1")

    def queue_url(self, logical_prefix: str) -> str:
        """A queue by the start of its logical id (`OutboxJobsQueue`, `OutboxJobsDlq`)."""
        for logical_id, url in dict(self.state["queues"]).items():
            if str(logical_id).startswith(logical_prefix):
                return str(url)
        raise KeyError(logical_prefix)

    @property
    def default_monthly_tokens(self) -> int:
        """The stack's stage budget (0: none, and the run has no budget to check)."""
        return int(dict(self.state.get("outputs") or {}).get("DefaultMonthlyTokens", 0))

    def table(self, logical_prefix: str) -> str:
        """A table name by the start of its logical id (`StorageJobsTable`)."""
        for logical_id, name in dict(self.state["tables"]).items():
            if str(logical_id).startswith(logical_prefix):
                return str(name)
        raise KeyError(logical_prefix)


def attach(port: int) -> Target:
    """A stack already running on `port` (its chaos state, if it was started with --chaos)."""
    state = read_state(port)
    raw = state.get("chaos")
    return Target(state=state, chaos=ChaosState(ChaosSpec.from_dict(raw)) if raw else None)


class StackProcess:
    """`outlast local up --chaos ...` in a child process: its own interpreter, its own GIL."""

    def __init__(self, spec: ChaosSpec, cdk_out: Path, port: int | None = None) -> None:
        self.spec = spec
        self.cdk_out = cdk_out
        self.port = port or free_port()
        self.log_path = log_dir(self.port) / "chaos-stack.log"
        self._process: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None

    def start(self) -> Target:
        """Start and wait for `ready:`; the stack's own log goes to a file, not to the report."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        arguments = [sys.executable, "-m", "outlast.cli", "local", "up", "--port", str(self.port)]
        arguments += ["--cdk-out", str(self.cdk_out), "--schedule-seconds", str(SCHEDULE_SECONDS)]
        for key, value in CHAOS_CONTEXT.items():
            arguments += ["--context", f"{key}={value}"]
        arguments += ["--chaos", self.spec.to_json()]
        self._log = self.log_path.open("w", encoding="utf-8")
        self._process = start_until_ready(
            arguments,
            cwd=PROJECT_ROOT,
            stderr=self._log,
            timeout_seconds=START_TIMEOUT_SECONDS,
            log_hint=f"; see {self.log_path}",
        )
        return attach(self.port)

    def stop(self) -> None:
        """Ctrl-C, as a user would; the stack stops everything it started."""
        if self._process is not None:
            interrupt(self._process, timeout_seconds=30)
        if self._log is not None:
            self._log.close()
