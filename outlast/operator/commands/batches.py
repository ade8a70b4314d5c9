"""`outlast ops batches list`: the open provider batches of batch-tier jobs and the jobs waiting on
them, orphaned batches (their batcher died before recording them: cancelled, their jobs waiting on
another batch) and the batcher's intents not yet resolved, for operators (AWS credentials, never
the API; `--local` for the local stack). See docs/runbook.md#batch-overdue and #batch-orphaned."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from outlast.cli.console import Console
from outlast.cli.errors import ExitCode
from outlast.operator.commands.dlq import now
from outlast.operator.targets import resolve
from outlast.operator.text import instant
from shared.batches import BatchIntent, OpenBatch
from shared.clock import to_iso

_MOST = 1000  # one Scan page of the table, which holds open batches only


def list_open(arguments: SimpleNamespace, console: Console) -> int:
    """`ops batches list`: every open batch, oldest first, with its model, age and jobs."""
    target = resolve(arguments)
    at = now()
    entries = target.batches.list_open(_MOST)
    batches = sorted(entries.batches, key=lambda batch: batch.created_at)
    intents = sorted(entries.intents, key=lambda intent: intent.created_at)
    lines = [f"{target.label}: {len(batches)} open batch(es), {len(intents)} intent(s)"]
    for batch in batches:
        overdue = " OVERDUE (past its 24-hour window)" if batch.overdue(at) else ""
        orphaned = " ORPHANED (its batcher died before recording it)" if batch.orphaned else ""
        lines.append(
            f"{batch.batch_id}  {batch.model}  created {instant(batch.created_at)}  "
            f"{len(batch.calls)} call(s){overdue}{orphaned}"
        )
        lines.extend(f"  job {job_id}" for job_id in batch.job_ids)
    lines.extend(
        f"intent {intent.intent_id}  {intent.model}  written {instant(intent.created_at)}  "
        f"{len(intent.calls)} call(s)"
        for intent in intents
    )
    document = {
        "target": target.label,
        "batches": [_document(batch, at) for batch in batches],
        "intents": [_intent(intent) for intent in intents],
    }
    console.show("\n".join(lines), document)
    return ExitCode.OK


def _document(batch: OpenBatch, at: Any) -> dict[str, Any]:
    return {
        "batchId": batch.batch_id,
        "model": batch.model,
        "createdAt": to_iso(batch.created_at),
        "overdue": batch.overdue(at),
        "calls": len(batch.calls),
        "jobIds": batch.job_ids,
        "orphaned": batch.orphaned,
    }


def _intent(intent: BatchIntent) -> dict[str, Any]:
    return {
        "intentId": intent.intent_id,
        "model": intent.model,
        "createdAt": to_iso(intent.created_at),
        "calls": len(intent.calls),
        "jobIds": intent.job_ids,
    }
