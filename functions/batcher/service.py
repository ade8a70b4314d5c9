"""The batcher's use case: the calls the workers handed over, one provider batch per model.

DESIGN.md, "Cost tiers": a call goes into a batch only while its job still waits on it (Running or
CancellationRequested under the call's hold, in no batch yet), so a redelivered message, or a call
of a job a later claim took over, makes no second line. The batch is recorded (the poller's list)
before it is named on its jobs; a crash between the two leaves the poller a batch whose jobs name
none, which it sees through all the same (it goes by the calls, not by the jobs' batchId).

Write-ahead: an intent is recorded before the provider's create, and the batch carries its id in
its metadata; the intent is deleted once the batch is recorded. A batcher that dies in between
(or whose create failed after reaching the provider) leaves the intent, and the poller finds the
batch that nothing recorded by its metadata (functions.batch_poller.intents): SQS delivers the
calls again into another batch, so that one is cancelled and what it billed counted as late usage.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from functions.batcher.dependencies import BatcherDependencies
from shared.batches import BatchCall, BatchIntent, OpenBatch, by_model, input_file
from shared.lifecycle import JobStatus
from shared.observability import logger
from shared.ports import TransitionConflictError

_WAITING = frozenset({JobStatus.RUNNING, JobStatus.CANCELLATION_REQUESTED})


@dataclass
class BatcherReport:
    """What one invocation did: the batches it created and the calls it dropped as stale."""

    batches: list[str] = field(default_factory=list)
    stale: int = 0


def batch_calls(deps: BatcherDependencies, calls: list[BatchCall]) -> BatcherReport:
    """Create one batch per model of the calls still waiting; raise to have SQS deliver them again."""
    report = BatcherReport()
    for model, group in by_model(calls).items():
        waiting = [call for call in group if _waits(deps, call)]
        report.stale += len(group) - len(waiting)
        if not waiting:
            continue
        calls_kept = tuple(call.without_body() for call in waiting)
        intent = BatchIntent(
            intent_id=uuid.uuid4().hex, model=model, created_at=deps.clock.now(), calls=calls_kept
        )
        deps.batches.put_intent(intent)  # first: a batch made after it can always be found
        created = deps.api().create(model, input_file(waiting), intent.metadata())
        deps.batches.put(
            OpenBatch(batch_id=created.batch_id, model=model, created_at=deps.clock.now(), calls=calls_kept)
        )
        # Once the batch is recorded nothing after it may fail the invocation: SQS would deliver
        # the calls again, and a job whose batchId is still unset would go into a second batch.
        _name_on_jobs(deps, waiting, created.batch_id)
        try:
            deps.batches.delete_intent(intent.intent_id)
        except Exception:  # noqa: BLE001 - harmless left: the poller finds its batch recorded, deletes it
            logger.warning("the batch's intent was not deleted", extra={"intent_id": intent.intent_id})
        report.batches.append(created.batch_id)
    return report


def _name_on_jobs(deps: BatcherDependencies, waiting: list[BatchCall], batch_id: str) -> None:
    """Record the batch on each job (what status and `ops batches list` show; the poller goes by
    the batch's calls, so a record that fails costs nothing but the name)."""
    for job_id in dict.fromkeys(call.job_id for call in waiting):
        hold = next(call.hold for call in waiting if call.job_id == job_id)
        try:
            deps.repository.record_batch(job_id, hold, batch_id)
        except TransitionConflictError:
            logger.info("job moved on before its batch was recorded", extra={"job_id": job_id})
        except Exception:  # noqa: BLE001 - see above: failing here would make a second batch
            logger.warning("the batch was not recorded on a job", extra={"job_id": job_id})


def _waits(deps: BatcherDependencies, call: BatchCall) -> bool:
    job = deps.repository.get_job(call.job_id)
    return (
        job is not None and job.status in _WAITING and job.lease_token == call.hold and job.batch_id is None
    )
