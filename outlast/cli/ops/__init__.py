"""`outlast ops`: the operator tools (AWS credentials, never the public API). They run the
functions' own adapters, so they work from a checkout (`pip install -e '.[ops]'`)."""

from __future__ import annotations

from outlast.cli.framework import Alias, Section
from outlast.cli.ops.batches import batches
from outlast.cli.ops.budgets import budgets
from outlast.cli.ops.dlq import dlq
from outlast.cli.ops.jobs import jobs
from outlast.cli.ops.tenants import tenants
from outlast.cli.ops.webhooks import webhooks

ops = Section(
    "ops",
    help="Operator tools: DLQs, jobs, budgets, tenants, batches, webhooks.\n\n"
    "They act with your AWS credentials, never through the API, and run from a checkout.",
    section="OPERATOR COMMANDS",
    examples=(
        "outlast ops dlq list --stack-name outlast-prod",
        "outlast ops jobs inspect 3f0c... --local",
        "outlast ops budgets set --tenant acme --monthly-tokens 5000000",
        "outlast ops tenants set --tenant acme --max-running 20",
    ),
    learn_more="Every ops command acts on --local, or on --stack-name NAME (default `outlast`) with your "
    "AWS credentials; the stage's settings it needs come from the stack. docs/runbook.md says when.",
)
for group in (dlq, jobs, budgets, tenants, batches, webhooks):
    ops.add_command(group)


def aliases() -> list[Alias]:
    """The old top-level spellings (`outlast dlq ...`), hidden, for one release."""
    return [
        Alias(group.name or "", group, f"outlast ops {group.name}")
        for group in (dlq, jobs, budgets, webhooks)
    ]
