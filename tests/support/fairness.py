"""What the end-to-end fairness tests share: an operator's `outlast ops` against a local stack,
and the running slots a tenant holds, read from the slots table itself."""

from __future__ import annotations

import json
from typing import Any

from shared.fairness import message_group
from tests.support.cli import run as run_cli
from tests.support.local_stack import RunningStack


def operator(stack: RunningStack, *argv: str) -> tuple[int, Any]:
    """`outlast ops ARGV --local --json` against the stack: its exit code and parsed output."""
    code, out, _ = run_cli("ops", *argv, "--local", "--port", str(stack.port), "--json")
    return code, json.loads(out)


def slots_of(stack: RunningStack, tenant: str) -> dict[str, str]:
    """The tenant's slot items (held, or expired and not yet taken over or released): each slot's
    key and the lease token it carries."""
    dynamodb = stack.aws("dynamodb")
    [table] = [name for name in dynamodb.list_tables()["TableNames"] if "SlotsTable" in name]
    items = dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]
    return {
        item["pk"]["S"]: item["leaseToken"]["S"]
        for item in items
        if item["pk"]["S"].startswith(message_group(tenant) + "#")
    }
