"""The writes that finish a job as the claim's lease holder: Succeeded with its stored result,
Failed, Canceled, and a Pending job's Failed once its attempts are spent.

Apart from the spine (functions.worker.service) because every path ends here: a one-step call, a
multi-step loop, a batch hand-off that finds a cancel, a hand-back with no attempts left. The
result is stored before the status write, so that a crash between the two costs no second model
call (the next claim adopts it); a cancel requested meanwhile wins over any other outcome.
"""

from __future__ import annotations

from functions.worker.claimed_run import ClaimedRun, cancel_won
from functions.worker.invocation import Invocation
from functions.worker.steps import StepsStopped
from shared.job import BlobLocation, JobError, JobRecord, JobResult, Usage, add_usage
from shared.job_errors import job_error
from shared.labels import normalize_label
from shared.lifecycle import JobStatus
from shared.observability import logger, metrics
from shared.planner import StepPlan, final_output
from shared.ports import Completion, Transition, TransitionConflictError
from shared.resources import INLINE_PAYLOAD_LIMIT_BYTES
from shared.retention import end_input


class TerminalWrites:
    """Each write conditional on the claim's lease token: a worker that lost its job writes nothing."""

    def __init__(self, invocation: Invocation) -> None:
        self._at = invocation

    async def succeed(self, run: ClaimedRun, completion: Completion, labels: tuple[str, ...] | None) -> None:
        """A one-step job's answer as its result, then Succeeded."""
        output = normalize_label(completion.text, labels)
        # The result with its usage before the status write: a crash after an item's write costs no
        # second model call (the next claim adopts it), and none leaves a Succeeded job without one.
        result = JobResult(
            job_id=run.job.job_id,
            output=output,
            usage=completion.usage,
            output_attempt=completion.output_attempt,
        )
        location, stored, body = await self._store_result(run, result)
        earlier: Usage | None = None
        if stored != result:
            # A claim that lost its lease wrote its answer first. Results are write-once, so its
            # output stands, and the job counts both calls' tokens: both were spent (the stored
            # one's unless a Failed write counted them already).
            logger.info("result adopted from an earlier claim")
            earlier = None if run.job.result_usage_counted else stored.usage
        run.usage, run.usage_has_result = add_usage(earlier, completion.usage), True
        await self._succeeded(run, location, stored, body)

    async def succeed_steps(self, run: ClaimedRun, plan: StepPlan, stopped: StepsStopped) -> None:
        """A multi-step job's final output as its result, then Succeeded."""
        result = JobResult(
            job_id=run.job.job_id,
            output=final_output(plan, stopped.outputs),
            usage=stopped.usage,
            output_attempt=stopped.result_attempt,
        )
        location, stored, body = await self._store_result(run, result)
        await self._succeeded(run, location, stored, body)

    async def adopt(self, run: ClaimedRun, location: BlobLocation, adopted: JobResult) -> None:
        """Succeeded with a result an earlier claim stored but never recorded."""
        logger.info("result adopted from an earlier claim")
        if run.job.total_steps > 1:
            run.usage_total = adopted.usage  # a multi-step result carries every step's tokens
        elif not run.job.result_usage_counted:
            run.usage, run.usage_has_result = adopted.usage, True
        # else: a Failed write counted them already (its Succeeded write had failed); a redrive
        # adopts the result without counting its tokens twice.
        await self.terminal(
            run, JobStatus.SUCCEEDED, result_location=location, result_attempt=adopted.output_attempt
        )

    async def checkpoint_answer(self, run: ClaimedRun) -> None:
        """Store a received answer that the failed run did not get to store (best effort)."""
        if run.unsaved is None:
            return
        result, location = run.unsaved
        try:
            await self._at.io(self._at.deps.payloads.put_result, result, location, run.job.expires_at)
        except Exception:  # noqa: BLE001 - storage still failing: the answer is lost, the job is not
            logger.warning("the model's answer could not be stored; the next claim asks again")

    async def fail(self, run: ClaimedRun, code: str) -> None:
        await self.terminal(run, JobStatus.FAILED, error=job_error(code))

    async def cancel(self, run: ClaimedRun) -> None:
        await self.terminal(run, JobStatus.CANCELED)

    async def terminal(
        self,
        run: ClaimedRun,
        target: JobStatus,
        *,
        error: JobError | None = None,
        result_location: BlobLocation | None = None,
        result_body: str | None = None,
        result_attempt: int | None = None,
    ) -> None:
        """Write a terminal state as the lease holder. Once a cancel is requested, Canceled wins:
        the caller asked to stop, so the output is dropped (usage is kept)."""
        if run.job.status is JobStatus.CANCELLATION_REQUESTED:
            target, error, result_location, result_body = JobStatus.CANCELED, None, None, None
            result_attempt = None
        now = self._at.now()
        # The input's final expiry before the terminal write (shared.retention): if it fails, the
        # job is handed back unfinished, and its next writer sets it.
        moved = await self._at.io(
            end_input, self._at.deps.payloads, run.job, target, now, self._at.settings.input_retention_hours
        )
        transition = Transition(
            job_id=run.job.job_id,
            source=run.job.status,
            target=target,
            now=now,
            lease_token=run.lease.token,
            error=error,
            usage=run.usage,
            usage_total=run.usage_total,
            extra_usage=run.extra_usage,
            # A Failed write that counts the stored result's tokens says so, for a redrive's adoption.
            result_usage_counted=target is JobStatus.FAILED and run.usage_has_result,
            result_location=result_location,
            result_body=result_body if target is JobStatus.SUCCEEDED else None,
            result_attempt=result_attempt if target is JobStatus.SUCCEEDED else None,
            input_location=moved,
        )
        try:
            run.job = await self._at.io(self._at.deps.repository.transition, transition)
            run.unsaved = None  # an inline result is stored with the status: nothing left to keep
        except TransitionConflictError as conflict:
            if cancel_won(conflict, run):
                await self.terminal(
                    run,
                    target,
                    error=error,
                    result_location=result_location,
                    result_body=result_body,
                    result_attempt=result_attempt,
                )
            else:
                logger.warning("terminal write lost; another writer owns the job")
            return
        metrics.add_metric(name=f"Jobs{run.job.status.value}", unit="Count", value=1)
        logger.info(
            "job finished",
            # The tenant: on-call's top-tenants query (docs/runbook.md#noisy-tenants) counts these
            # lines by it, rather than a custom metric paid per tenant.
            extra={
                "status": run.job.status.value,
                "error_code": error.code if error else None,
                "tenant": run.job.tenant,
            },
        )

    async def finish_pending_exhausted(self, job: JobRecord) -> None:
        """A Pending job whose attempts are spent (no claim holds it): Failed `retries_exhausted`."""
        now = self._at.now()
        moved = await self._at.io(
            end_input,
            self._at.deps.payloads,
            job,
            JobStatus.FAILED,
            now,
            self._at.settings.input_retention_hours,
        )
        transition = Transition(
            job_id=job.job_id,
            source=JobStatus.PENDING,
            target=JobStatus.FAILED,
            now=now,
            error=job_error("retries_exhausted"),
            input_location=moved,
        )
        try:
            await self._at.io(self._at.deps.repository.transition, transition)
        except TransitionConflictError:
            logger.info("exhausted job moved on before it could be failed")

    async def _store_result(
        self, run: ClaimedRun, result: JobResult
    ) -> tuple[BlobLocation, JobResult, str | None]:
        """Where the result goes, and the result that is stored there (an earlier claim's wins).

        A small one rides in the terminal write itself (no write of its own); until that write is
        done it is kept to store as an item if the run fails. A larger one is written first."""
        if self._at.deps.repository.fits_in_job_item(run.job, result_body=result.body()):
            run.unsaved = (result, "item")
            return "job", result, result.body()
        location: BlobLocation = (
            "s3" if len(result.output.encode("utf-8")) > INLINE_PAYLOAD_LIMIT_BYTES else "item"
        )
        run.unsaved = (result, location)
        stored = await self._at.io(self._at.deps.payloads.put_result, result, location, run.job.expires_at)
        run.unsaved = None
        return location, stored, None

    async def _succeeded(
        self, run: ClaimedRun, location: BlobLocation, stored: JobResult, body: str | None
    ) -> None:
        """The Succeeded write of a stored result (its attempt is the one readers show from then on)."""
        await self.terminal(
            run,
            JobStatus.SUCCEEDED,
            result_location=location,
            result_body=body,
            result_attempt=stored.output_attempt,
        )
