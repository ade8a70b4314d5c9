"""`outlast ops batches list`: open provider batches of batch-tier jobs (docs/runbook.md#batch-overdue)."""

from __future__ import annotations

from typing import Any

from outlast.cli.framework import Section, Verb
from outlast.cli.ops.common import AWS_ERROR, codes, json_flag, run, target_options
from outlast.cli.session import guarded

batches = Section("batches", help="Open provider batches of batch-tier jobs, and the jobs waiting on them.")


@batches.command(
    "list",
    cls=Verb,
    exit_codes=codes(OK="listed", ERROR=AWS_ERROR),
    epilog="One Scan of the open batches' table, which holds only batches the poller has not seen through.",
    examples=("outlast ops batches list --local",),
)
@target_options
@json_flag
@guarded
def list_open(**options: Any) -> int:
    """List open batches, oldest first: model, age, calls, and the jobs waiting on each."""
    return run("batches", "list_open", options)
