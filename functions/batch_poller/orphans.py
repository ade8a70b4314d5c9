"""Provider batches nothing recorded (DESIGN.md, "Cost tiers"): the batcher writes an intent before
it creates a batch, and deletes it once the batch is recorded; an intent older than the batcher's
timeout plus a margin (`batchIntentGraceSeconds`) names a batcher that died in between, or a create
that failed after reaching the provider.

The poller looks the provider's batches up for those whose metadata names the intent. None: no
batch was made; the intent goes. Found: SQS has delivered (or will deliver) its calls again into
another batch, so nobody waits on this one: it is recorded as an orphaned open batch (unless its
batcher did record it before dying), cancelled at the provider, and the intent goes. Once an
orphan has ended, its answers are never kept; what the provider billed for them is counted as late
usage once per (job, batch), onto each of its jobs once that job has ended (until then the orphan
stays open and is looked at again). Every step is safe to repeat: the orphan's record is
conditional, a cancel of an ended batch is never sent, and late usage is counted once.
"""

from __future__ import annotations

from datetime import timedelta

from functions.batch_poller.dependencies import BatchPollerDependencies
from functions.batch_poller.late import lines_of, output_lines, settle_late_lines
from shared.batches import INTENT_METADATA_KEY, BatchIntent, OpenBatch, ProviderBatch
from shared.lifecycle import TERMINAL
from shared.observability import logger

_CANCELLING = "cancelling"


def resolve_intent(deps: BatchPollerDependencies, intent: BatchIntent) -> int:
    """Resolve an intent past its grace; the number of orphaned batches this call recorded."""
    grace = timedelta(seconds=deps.settings.batch_intent_grace_seconds)
    if intent.unresolved(deps.clock.now(), grace):
        return 0  # its batcher may still be between the create and the record
    # Clocks differ (the batcher's, the provider's): look a grace further back than the intent.
    found = deps.api().find(INTENT_METADATA_KEY, intent.intent_id, since=intent.created_at - grace)
    orphaned = 0
    for provider in found:
        if not deps.batches.put_orphan(intent.orphan(provider.batch_id)):
            continue  # recorded by its batcher, or by an earlier run of the poller
        orphaned += 1
        logger.warning(
            "orphaned provider batch found",
            extra={
                "batch_id": provider.batch_id,
                "intent_id": intent.intent_id,
                "status": provider.status,
                "job_ids": intent.job_ids,
            },
        )
        if not provider.ended:
            _cancel(deps, provider)
    if not found:
        logger.info("batch intent resolved: no batch was created", extra={"intent_id": intent.intent_id})
    deps.batches.delete_intent(intent.intent_id)  # last: a run that died before it is repeated
    return orphaned


def see_orphan_through(deps: BatchPollerDependencies, batch: OpenBatch, provider: ProviderBatch) -> bool:
    """Cancel an orphan still running; once it has ended and each of its jobs too, count what it
    billed as late usage. True when it is seen through (the caller deletes it)."""
    if not provider.ended:
        if provider.status != _CANCELLING:
            _cancel(deps, provider)
        return False
    jobs = [deps.repository.get_job(job_id) for job_id in batch.job_ids]
    if any(job is not None and job.status not in TERMINAL for job in jobs):
        return False  # late usage counts onto an ended job only: look again at the next run
    answers = output_lines(deps, provider.output_file_id)
    for job_id in batch.job_ids:
        calls = [call for call in batch.calls if call.job_id == job_id]
        settle_late_lines(deps, job_id, batch.batch_id, lines_of(calls, answers))
    logger.info(
        "orphaned batch seen through",
        extra={"batch_id": batch.batch_id, "status": provider.status, "answered": len(answers)},
    )
    return True


def _cancel(deps: BatchPollerDependencies, provider: ProviderBatch) -> None:
    deps.api().cancel(provider.batch_id)
    logger.info("orphaned batch cancelled", extra={"batch_id": provider.batch_id})
