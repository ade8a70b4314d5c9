"""Budget settlement and document unpinning on the jobs stream (DESIGN.md, "Token budgets:
reserve, then settle"; "Documents": the job's terminal write unpins its document).

The notifier is the stream's last allowed reader, so the settlement rides on it: each terminal
write of a job whose run holds a reservation settles that run once, from the record's NEW_IMAGE
alone (its `w`, status, usage and budget hold; the table is never read). Settling is safe to
repeat: a duplicate record, a retried batch or the sweeper finds the reservation gone and does
nothing. A failure to settle fails the record, so Lambda retries it; a record that never
settles (retries exhausted) is settled by the sweeper. A terminal write of a job on a document
removes the job from the document's pins the same way: once, safe to repeat (the pins are a set
of job ids), from the record alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from shared import resources as r
from shared.adapters.dynamo_items import job_from_item
from shared.budget_ports import BudgetLedger
from shared.budgets import settle_job
from shared.documents.ports import DocumentRepository
from shared.job import Caller, JobRecord
from shared.ports import WriteKind

_CHANGES = frozenset({"INSERT", "MODIFY"})


def terminal_job(record: Mapping[str, Any]) -> JobRecord | None:
    """The job a terminal write left, as its record's new image shows it; None for any other record.

    An image that does not parse is None here too: the notifier skips and counts it already.
    """
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    if record.get("eventName") not in _CHANGES or image.get(r.TYPE_ATTRIBUTE, {}).get("S") != r.JOB_ITEM_TYPE:
        return None
    if image.get(r.WRITE_KIND_ATTRIBUTE, {}).get("S") != WriteKind.TERMINAL.value:
        return None
    try:
        return job_from_item(image)
    except (KeyError, TypeError, ValueError, ValidationError):
        return None


def settle_record(ledger: BudgetLedger, record: Mapping[str, Any]) -> None:
    """Settle the run a terminal write ended, if it holds a reservation (at most once)."""
    job = terminal_job(record)
    if job is not None:
        settle_job(ledger, job)


def unpin_record(documents: DocumentRepository, record: Mapping[str, Any]) -> None:
    """Release the document a terminal write's job read, if it read one."""
    job = terminal_job(record)
    if job is not None and job.document_id is not None:
        documents.unpin(Caller(tenant=job.tenant, sub=job.owner), job.document_id, job.job_id)
