"""The sweeper's repair of pins (DESIGN.md, "Documents": the sweeper repairs pins whose job is
terminal). A pin is normally removed by its job's terminal write (the notifier); one that is not
(the notifier gave up on the record, or the submit stopped between the pin and the job) would keep
its document from being deleted. Pinned documents carry the keys of a sparse, sharded index, due
a grace after their last pin (never a scan); when due, each job of the pin set is read once: an
ended job's pin, an expired job's (gone in code, however late TTL removes it: the pin kept the
document only until then), and a missing job's (a later completion of its submit pins again,
before it writes the job), is removed; then the check moves a grace on while pins are left, or the document
leaves the index. Every write is safe to repeat. No boto3: the stores come in as ports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.documents.ports import DocumentRepository
from shared.job import Caller, JobRecord
from shared.lifecycle import TERMINAL
from shared.observability import logger


@dataclass(frozen=True)
class PinRepair:
    """What one pass did: pins removed, and shards or documents that could not be looked at."""

    unpinned: int
    errors: int


def repair_pins(
    documents: DocumentRepository,
    get_job: Callable[[str], JobRecord | None],
    *,
    now: datetime,
    grace: timedelta,
    shards: int,
    per_shard: int,
) -> PinRepair:
    """One pass over every shard of pinned documents whose check is due."""
    unpinned = errors = 0
    for shard in range(shards):
        try:
            due = documents.pins_due(str(shard), now, per_shard)
        except Exception:  # noqa: BLE001 - logged; one shard must not hold up the others
            logger.exception("sweeper could not read pinned documents", extra={"shard": shard})
            errors += 1
            continue
        for owner, document_id in due:
            try:
                unpinned += _repair(documents, get_job, owner, document_id, now=now, next_check=now + grace)
            except Exception:  # noqa: BLE001 - logged; one document must not hold up the rest
                logger.exception(
                    "sweeper could not repair a document's pins", extra={"document_id": document_id}
                )
                errors += 1
    return PinRepair(unpinned=unpinned, errors=errors)


def _repair(
    documents: DocumentRepository,
    get_job: Callable[[str], JobRecord | None],
    owner: Caller,
    document_id: str,
    *,
    now: datetime,
    next_check: datetime,
) -> int:
    document = documents.get(owner, document_id)
    if document is None:
        return 0
    unpinned = 0
    for job_id in sorted(document.pinned_by):
        job = get_job(job_id)
        if job is None or job.status in TERMINAL or job.is_expired(now):
            documents.unpin(owner, document_id, job_id)
            logger.warning(
                "sweeper removed a pin nothing else removed",
                extra={"document_id": document_id, "job_id": job_id, "job_found": job is not None},
            )
            unpinned += 1
    documents.reschedule_pin_check(owner, document_id, next_check)
    return unpinned
