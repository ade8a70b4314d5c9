"""What the provider billed for answers no job kept: read back from a batch's output file and
counted onto each ended job, then its tenant's budget, once per (job, batch) (DESIGN.md, "Cost
tiers"). Shared by the poller's two paths: a batch a job moved on from, and an orphaned batch."""

from __future__ import annotations

from typing import Any

from functions.batch_poller.dependencies import BatchPollerDependencies
from shared.batches import BatchCall, billed_usage
from shared.budgets import late_usage_for, settle_late
from shared.job import add_usage
from shared.observability import logger


def output_lines(deps: BatchPollerDependencies, file_id: str | None) -> dict[str, dict[str, Any]]:
    """A batch's output lines by `custom_id` (none when the batch has no output file)."""
    if file_id is None:
        return {}
    return {str(line.get("custom_id")): line for line in deps.api().lines(file_id)}


def lines_of(calls: list[BatchCall], answers: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The output lines that answer `calls`."""
    return [answers[call.custom_id] for call in calls if call.custom_id in answers]


def settle_late_lines(
    deps: BatchPollerDependencies, job_id: str, batch_id: str, lines: list[dict[str, Any]]
) -> None:
    """Count what the provider billed for a job's discarded answers: onto the ended job, then its
    tenant's budget, once per (job, batch) each (both writes are conditional, so a run repeated
    after a crash between them makes the one still owed). A job handed back from this batch by an
    earlier run, or not ended (taken over after its hold ran out), counts nothing here."""
    usage = add_usage(*(billed_usage(line) for line in lines))
    if usage is None:
        return
    job = deps.repository.count_late_usage(job_id, batch_id, usage)
    if job is None:
        logger.info("late answers discarded uncounted", extra={"job_id": job_id, "batch_id": batch_id})
        return
    late = late_usage_for(job, batch_id, usage)
    if late is not None:
        settle_late(deps.budgets, late)
