"""`outlast ops batches list`: open provider batches of batch-tier jobs (docs/runbook.md#batch-overdue)."""

from __future__ import annotations

from typing import Any

from outlast.cli.framework import Section, Verb
from outlast.cli.ops.common import AWS_ERROR, codes, json_flag, run, target_options
from outlast.cli.session import guarded

batches = Section(
    "batches", help="Open provider batches of batch-tier jobs, the jobs waiting on them, orphans and intents."
)


@batches.command(
    "list",
    cls=Verb,
    exit_codes=codes(OK="listed", ERROR=AWS_ERROR),
    epilog=(
        "One Scan of the open batches' table, which holds only batches the poller has not seen through "
        "(orphans among them: batches their batcher died before recording) and the batcher's intents."
    ),
    examples=("outlast ops batches list --local",),
)
@target_options
@json_flag
@guarded
def list_open(**options: Any) -> int:
    """List open batches, oldest first: model, age, calls, the jobs of each; orphans; intents."""
    return run("batches", "list_open", options)
