"""The worker use case: claim a job atomically, call the model under a lease, record the outcome.

No transaction or lock is held across the model call: the claim is one conditional write,
the lease is kept alive by heartbeats, and every later write is conditional on the lease
token, so a worker that lost its job can never overwrite the one that has it.

Whatever goes wrong inside the worker that is not a provider's answer (storage errors, a
secret that cannot be read, an unknown prompt version, a bug) hands the job back to Pending
with backoff instead of leaving it Running until the sweeper; an answer the model already gave
is kept as the job's result first, and the next claim adopts it instead of paying again.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TypeVar

from functions.worker.backoff import backoff_seconds
from functions.worker.dependencies import WorkerDependencies
from functions.worker.signals import CancelObserved, LeaseLost, OutputWriteFailed, ReleaseNeeded, RetryLater
from functions.worker.steps import StepLoop, StepsStopped, step_request
from functions.worker.streaming import StreamingCall
from functions.worker.structured import checked, checked_answer, invalid_output, response_schema
from shared.batches import BatchCall, hold_expiry
from shared.clock import truncate_to_millis
from shared.errors import (
    FlexUnavailableError,
    InvalidAnswerError,
    TerminalProviderError,
    TransientProviderError,
)
from shared.fairness import message_group
from shared.job import BlobLocation, JobError, JobInput, JobRecord, JobResult, StepOutput, Usage, add_usage
from shared.job_errors import job_error
from shared.lifecycle import JobStatus
from shared.messages import parse_job_message
from shared.observability import bind_job_in_task, logger, metrics
from shared.payload_reads import input_of
from shared.planner import Step, StepPlan, final_output, plan_of, ready_steps
from shared.ports import (
    Completion,
    CompletionRequest,
    JobMessage,
    Lane,
    Lease,
    ModelProvider,
    Transition,
    TransitionConflictError,
)
from shared.prompts import cache_key, template_for_version
from shared.resources import INLINE_PAYLOAD_LIMIT_BYTES, MAX_DELAY_SECONDS
from shared.retention import end_input, input_expiry, input_needs_renewal
from shared.slots import SlotLostError, slot_retry_delay, take_any
from shared.tiers import Tier, call_tier

T = TypeVar("T")
__all__ = ["JobWorker", "RetryLater"]


@dataclass
class _Run:
    """One claimed job: the record as last written and the lease that guards every write."""

    job: JobRecord
    lease: Lease
    message: JobMessage  # what dispatched it: a hand-back sends a fresh copy of it
    usage: Usage | None = None  # added to the job's (a one-step job's call)
    # `usage` includes the tokens of the job's stored result (JobRecord.result_usage_counted).
    usage_has_result: bool = False
    usage_total: Usage | None = None  # replaces it (a multi-step job: every checkpoint's tokens)
    extra_usage: Usage | None = None  # with usage_total: the calls outside the checkpoints
    # The model's answer once received, until it is stored as the job's result: an error before
    # the store is followed by one more try, so the next claim adopts it instead of paying again.
    unsaved: tuple[JobResult, BlobLocation] | None = None
    last_heartbeat: float = field(default_factory=time.monotonic)  # the claim counts as one
    streaming: StreamingCall | None = None  # the final call of a streaming job, while it runs
    slot: int | None = None  # the running slot a capped tenant's claim holds (shared.slots)


class JobWorker:
    """Processes one queue message at a time; many run concurrently in one invocation.

    `solo` says the invocation's batch held one record: a claim records it, so that a crash
    under this claim is charged to this job alone (shared.leases).
    """

    def __init__(self, deps: WorkerDependencies, deadline: float, *, solo: bool) -> None:
        self._deps = deps
        self._settings = deps.settings
        self._deadline = deadline  # time.monotonic() after which in-flight jobs are released
        self._solo = solo

    async def _io(self, function: Callable[..., T], *args: object) -> T:
        """Run a blocking AWS request on the worker's pool for them, off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._deps.executor, lambda: function(*args))

    def _now(self) -> datetime:
        return truncate_to_millis(self._deps.clock.now())

    async def handle(self, body: str, lane: Lane) -> None:
        """Process one message of `lane`'s queue; return to delete it, raise RetryLater to keep it.

        A job handed back to Pending (a release, a backoff, a deferral) is dispatched by a fresh
        delayed message, never by keeping this one: the queue's receive count then counts crashes
        only, and the redrive policy never dead-letters a healthy job (DESIGN.md, "Delivery and
        execution")."""
        message = parse_job_message(body)
        if message is None:
            await self._park(lane, body, "unparseable", None)
            return
        bind_job_in_task(message.job_id, message.trace_id)
        run = await self._claim(message, body, lane)
        if run is not None:
            try:
                await self._execute(run)
            finally:
                await self._release_slot(run)

    async def _park(self, lane: Lane, body: str, reason: str, job_id: str | None) -> None:
        # Poison: no retry can fix it, so it goes to the DLQ now instead of after maxReceiveCount.
        await self._io(self._deps.queues[lane].send_to_dlq, body, reason, job_id)
        metrics.add_metric(name="PoisonMessages", unit="Count", value=1)
        logger.warning("poison message parked on the DLQ", extra={"reason": reason})

    async def _claim(self, message: JobMessage, body: str, lane: Lane) -> _Run | None:
        """One conditional UpdateItem, no read first: when it is refused, the job as it stood
        (ReturnValuesOnConditionCheckFailure) says why."""
        now = self._now()
        lease = Lease(
            token=uuid.uuid4().hex, expires_at=now + timedelta(seconds=self._settings.lease_seconds)
        )
        claim = Transition(
            job_id=message.job_id,
            source=JobStatus.PENDING,
            target=JobStatus.RUNNING,
            now=now,
            new_lease=lease,
            count_attempt=True,
            solo=self._solo,
            # A shared-queue message of a job that crashed a batch is stale: it runs alone now.
            require_not_isolated=lane is Lane.SHARED,
            require_due=True,
            # No sweep index write: the entry the submit wrote brings the sweeper round within
            # sweepLookSeconds, and it defers a live lease (DESIGN.md, "Cost discipline").
        )
        try:
            claimed = await self._io(self._deps.repository.transition, claim)
        except TransitionConflictError as refused:
            # A capped tenant's job refuses a claim without a slot; its refusal says so for free.
            if refused.current is not None and _waits_for_slot(refused.current, lane, now):
                return await self._claim_with_slot(
                    refused.current, claim, lease, message, body=body, lane=lane
                )
            await self._refused(refused.current, message, body=body, lane=lane)
            return None
        # DEBUG: the one INFO line of a job's run is "job finished" (every line is billed).
        logger.debug("claimed", extra={"attempt": claimed.attempts, "solo": self._solo, "lane": lane.value})
        return _Run(job=claimed, lease=lease, message=message)

    async def _claim_with_slot(
        self, job: JobRecord, claim: Transition, lease: Lease, message: JobMessage, *, body: str, lane: Lane
    ) -> _Run | None:
        """A capped tenant's job: a running slot first, carrying this claim's lease, then the same
        claim holding it (DESIGN.md, "Fairness between tenants"). No free slot: deferred."""
        group = message_group(job.tenant)
        slot = await self._io(take_any, self._deps.slots, group, job.max_running, lease, claim.now)
        if slot is None:
            await self._defer_for_slot(job, message)
            return None
        try:
            claimed = await self._io(self._deps.repository.transition, replace(claim, slot=slot))
        except TransitionConflictError as refused:
            await self._io(self._deps.slots.release, group, slot, lease.token)
            await self._refused(refused.current, message, body=body, lane=lane)
            return None
        logger.debug("claimed", extra={"attempt": claimed.attempts, "slot": slot, "lane": lane.value})
        return _Run(job=claimed, lease=lease, message=message, slot=slot)

    async def _defer_for_slot(self, job: JobRecord, message: JobMessage) -> None:
        """Every running slot of the tenant is held: the job comes back later as a fresh delayed
        message (this one is deleted). Nothing is written and no attempt is charged: the job is
        still Pending and due, as it was."""
        wait = slot_retry_delay(self._settings.slot_retry_seconds, self._deps.random())
        metrics.add_metric(name="SlotDeferrals", unit="Count", value=1)
        logger.info(
            "deferred: every running slot of the tenant is held",
            extra={"delay_seconds": wait, "tenant": job.tenant},
        )
        await self._dispatch(job, message, wait)

    async def _extend_slot(self, run: _Run, lease: Lease) -> None:
        """A heartbeat extends the running slot with the lease; a slot taken over (it expired
        before this heartbeat) means the cap no longer counts this job: hand it back."""
        if run.slot is None:
            return
        try:
            await self._io(self._deps.slots.extend, message_group(run.job.tenant), run.slot, lease)
        except SlotLostError as lost:
            logger.warning("the running slot was taken over after it expired; handing the job back")
            raise ReleaseNeeded from lost

    async def _release_slot(self, run: _Run) -> None:
        """The claim is over, however it ended: free its slot (only this lease's token can)."""
        if run.slot is None:
            return
        try:
            await self._io(self._deps.slots.release, message_group(run.job.tenant), run.slot, run.lease.token)
        except Exception:  # noqa: BLE001 - the slot frees itself at the lease's expiry anyway
            logger.warning("the running slot was not released; it frees when the lease expires")

    async def _refused(self, job: JobRecord | None, message: JobMessage, *, body: str, lane: Lane) -> None:
        """A refused claim costs no model call; the job as it stood decides what the message does."""
        if job is None:
            await self._park(lane, body, "unknown_job", message.job_id)
        elif job.status is not JobStatus.PENDING:
            # Terminal, or held by another worker (whose lease the sweeper watches): a duplicate.
            logger.info("delivery dropped", extra={"status": job.status.value})
        elif lane is Lane.SHARED and job.isolated:
            logger.info("delivery dropped: the job runs from the isolation queue now")
        elif job.stalls >= job.max_attempts:
            await self._finish_pending_exhausted(job, self._now())
        elif job.dispatch_at > (now := self._now()):
            # Early: a wait longer than SQS's longest delay, or a duplicate while the job backs off.
            # Come back when it is due, as a fresh message (this one is deleted).
            wait = max(1, int((job.dispatch_at - now).total_seconds() + 0.999))
            await self._dispatch(job, message, wait)
        else:
            # It was claimable when read back: another worker won the race and then let go.
            logger.info("claim lost")

    async def _execute(self, run: _Run) -> None:
        try:
            await self._run_claimed(run)
        except RetryLater:
            raise
        except LeaseLost:
            logger.warning("lease lost during the model call; writing nothing more")
            await self._stop_stream(run, lost=True)
        except Exception:  # noqa: BLE001 - whatever it is, the job must not stay Running
            # Not a provider's answer: storage, a secret, the provider client, a prompt, a bug.
            logger.exception("the worker failed while running the job; handing it back")
            metrics.add_metric(name="WorkerErrors", unit="Count", value=1)
            stopped = await self._stop_stream(run)
            if run.job.total_steps == 1 and stopped is not None:
                run.usage = stopped  # what the stopped call cost goes with the hand-back
            await self._checkpoint_answer(run)
            await self._retry_or_exhaust(run, provider_hint=None)

    async def _checkpoint_answer(self, run: _Run) -> None:
        """Store a received answer that the failed run did not get to store (best effort)."""
        if run.unsaved is None:
            return
        result, location = run.unsaved
        try:
            await self._io(self._deps.payloads.put_result, result, location, run.job.expires_at)
        except Exception:  # noqa: BLE001 - storage still failing: the answer is lost, the job is not
            logger.warning("the model's answer could not be stored; the next claim asks again")

    async def _run_claimed(self, run: _Run) -> None:
        job = run.job
        await self._renew_input_of_old_job(job)
        if await self._adopt_earlier_result(run):
            return
        # A small input came with the claim (no read); a larger one is read from its item or S3.
        job_input = await self._io(input_of, job, self._deps.payloads)
        if job_input is None:
            await self._fail(run, "input_missing")
            return
        # The same plan as at submit: the same text and the parameters stored on the job.
        plan = plan_of(job, job_input)
        if self._call_tier(job) is Tier.BATCH and await self._hand_to_batcher(run, plan, job_input):
            return
        if plan.total_steps > 1:
            await self._run_steps(run, plan)
            return
        await self._run_one_step(run, plan, job_input)

    async def _run_one_step(self, run: _Run, plan: StepPlan, job_input: JobInput) -> None:
        """A one-step job: its one call (asked again once if structured and off its schema), then
        the outcome."""
        request = self._one_step_request(run.job, plan, job_input)
        # `run.usage` may hold a refused structured answer's tokens already (`_answer`): whatever
        # ends the claim adds its own to them.
        try:
            completion = await self._answer(run, request)
        except FlexUnavailableError as error:
            # Nothing generated, nothing billed: this claim bought nothing unless a first answer
            # (refused by its schema) was paid for.
            await self._defer_flex_unavailable(run, error.retry_after, refund=run.usage is None)
        except TransientProviderError as error:
            # A stream cut mid-way generated (and was billed for) part of an answer: counted by estimate.
            run.usage = add_usage(run.usage, error.usage if isinstance(error.usage, Usage) else None)
            await self._retry_or_exhaust(run, error.retry_after)
        except TerminalProviderError as error:
            run.usage = add_usage(run.usage, error.usage if isinstance(error.usage, Usage) else None)
            await self._fail(run, error.job_code)
        except CancelObserved:
            run.usage = add_usage(run.usage, await self._stop_stream(run))
            await self._cancel(run)
        except ReleaseNeeded:
            run.usage = add_usage(run.usage, await self._stop_stream(run))
            await self._release(run)
        except OutputWriteFailed as failed:
            run.usage = add_usage(run.usage, failed.usage if isinstance(failed.usage, Usage) else None)
            raise
        else:
            await self._succeed(run, completion, job_input.labels)

    def _one_step_request(self, job: JobRecord, plan: StepPlan, job_input: JobInput) -> CompletionRequest:
        template = template_for_version(job.operation, job.prompt_version)
        return CompletionRequest(
            model=job.model,
            messages=template.render(job_input.text, job_input.labels),
            # The plan's cap: the job's maxOutputTokens, or the most a caller may ask for.
            max_output_tokens=plan.steps[0].max_tokens,
            response_schema=response_schema(plan, plan.steps[0]),
            tier=self._call_tier(job),
            cache_key=cache_key(job.tenant, job.operation, job.prompt_version),
        )

    async def _hand_to_batcher(self, run: _Run, plan: StepPlan, job_input: JobInput) -> bool:
        """A batch job's ready calls go to the batcher, and the claim ends with the job Running,
        waiting on the provider batch under a hold (DESIGN.md, "Cost tiers"). False when it has no
        call left to make (every step checkpointed): the caller finishes it as usual."""
        from functions.worker.provider import chat_arguments  # noqa: PLC0415 - the batch tier only

        job = run.job
        if plan.total_steps == 1:
            calls = [(plan.steps[0], self._one_step_request(job, plan, job_input))]
        else:
            done = await self._io(self._deps.steps.get_steps, job.job_id, self._now())
            key = cache_key(job.tenant, job.operation, job.prompt_version)
            calls = [
                (step, step_request(plan, step, done, model=job.model, tier=Tier.BATCH, cache_key=key))
                for step in ready_steps(plan, done)
            ]
            if not calls:
                return False
            if len(done) > job.completed_steps:
                # The last batch's checkpoints, shown as progress (a write the pushes follow).
                usage = add_usage(*(output.usage for output in done.values()), job.extra_usage)
                await self._record_progress(run, len(done), usage, job.extra_usage)
        batch_calls = [
            BatchCall(
                job_id=job.job_id,
                hold=run.lease.token,
                step_id=step.step_id,
                attempt=job.attempts,
                final=plan.total_steps == 1,
                structured=request.response_schema is not None,
                model=job.model,
                body=chat_arguments(request),
            )
            for step, request in calls
        ]
        # The hold first: a job whose calls were sent is one that waits for them. Should the send
        # fail, the hold (the claim's token) hands the job back like any claim.
        hold = Lease(token=run.lease.token, expires_at=hold_expiry(self._now()))
        try:
            run.job = await self._io(self._deps.repository.hold_for_batch, job.job_id, hold)
        except TransitionConflictError as conflict:
            raise LeaseLost from conflict
        if run.job.status is JobStatus.CANCELLATION_REQUESTED:
            await self._cancel(run)
            return True
        try:
            await self._io(self._deps.batch_calls.send, batch_calls)
        except Exception:  # noqa: BLE001 - the queue is down: the job is handed back, not left waiting
            logger.exception("the calls could not be handed to the batcher; handing the job back")
            await self._back_to_pending(run, 1)
            return True
        metrics.add_metric(name="BatchHandoffs", unit="Count", value=1)
        logger.info("job waits on a provider batch", extra={"calls": len(batch_calls)})
        return True

    async def _store_result(self, run: _Run, result: JobResult) -> tuple[BlobLocation, JobResult, str | None]:
        """Where the result goes, and the result that is stored there (an earlier claim's wins).

        A small one rides in the terminal write itself (no write of its own); until that write is
        done it is kept to store as an item if the run fails. A larger one is written first."""
        if self._deps.repository.fits_in_job_item(run.job, result_body=result.body()):
            run.unsaved = (result, "item")
            return "job", result, result.body()
        location: BlobLocation = (
            "s3" if len(result.output.encode("utf-8")) > INLINE_PAYLOAD_LIMIT_BYTES else "item"
        )
        run.unsaved = (result, location)
        stored = await self._io(self._deps.payloads.put_result, result, location, run.job.expires_at)
        run.unsaved = None
        return location, stored, None

    async def _renew_input_of_old_job(self, job: JobRecord) -> None:
        retention = self._settings.input_retention_hours
        now = self._now()
        if input_needs_renewal(job, now, retention):
            await self._io(
                self._deps.payloads.set_input_expiry,
                job.job_id,
                job.input_location,
                input_expiry(now, retention),
            )

    async def _adopt_earlier_result(self, run: _Run) -> bool:
        """Finish the job with a result an earlier claim stored but never recorded; True if so."""
        if run.job.attempts <= 1 and run.job.redrive_count == 0 and run.job.tier is not Tier.BATCH:
            # The first claim of this run of the job: nobody wrote a result before (but a batch job's
            # poller, whose hand-back gives the attempt back).
            return False
        found = await self._io(self._deps.payloads.find_result, run.job.job_id)
        if found is None:
            return False
        location, adopted = found
        logger.info("result adopted from an earlier claim")
        if run.job.total_steps > 1:
            run.usage_total = adopted.usage  # a multi-step result carries every step's tokens
        elif not run.job.result_usage_counted:
            run.usage, run.usage_has_result = adopted.usage, True
        # else: a Failed write counted them already (its Succeeded write had failed); a redrive
        # adopts the result without counting its tokens twice.
        await self._terminal(
            run, JobStatus.SUCCEEDED, result_location=location, result_attempt=adopted.output_attempt
        )
        return True

    async def _run_steps(self, run: _Run, plan: StepPlan) -> None:
        """A multi-step job: the steps no claim checkpointed yet (functions.worker.steps), then the
        outcome: Succeeded with the final output, Failed on a terminal step, handed back otherwise."""
        job = run.job
        now = self._now()
        checkpoints = await self._io(self._deps.steps.get_steps, job.job_id, now)
        retention = self._settings.input_retention_hours
        if checkpoints and input_needs_renewal(job, now, retention):
            await self._io(
                self._deps.steps.set_steps_expiry, job.job_id, list(checkpoints), input_expiry(now, retention)
            )
        provider = await self._io(self._deps.provider)
        loop = asyncio.get_running_loop()
        streamed = plan.final_step if job.stream else None
        tier = self._call_tier(job)

        def start_call(step: Step, request: CompletionRequest) -> asyncio.Future[Completion]:
            # A streaming job streams its final call only; the steps before it are checkpointed as ever.
            # Every answer is checked against its step's schema (extract) before it may be kept.
            if step == streamed:
                return asyncio.ensure_future(
                    self._checked(request, self._start_stream(run, provider, request))
                )
            return loop.run_in_executor(
                self._deps.model_executor, checked_answer, provider, self._deps.validator, request
            )

        steps = StepLoop(
            plan,
            job.model,
            checkpoints,
            extra_usage=job.extra_usage,
            concurrency=self._settings.step_concurrency,
            heartbeat_seconds=self._settings.heartbeat_seconds,
            deadline=self._deadline,
            call_timeout=self._call_timeout(tier),
            tier=tier,
            cache_key=cache_key(job.tenant, job.operation, job.prompt_version),
            monotonic=time.monotonic,
            start_call=start_call,
            checkpoint=lambda step, completion: self._checkpoint_step(run, step, completion),
            progress=lambda completed, usage, extra: self._record_progress(run, completed, usage, extra),
            heartbeat=lambda: self._heartbeat(run),
        )
        logger.debug("steps", extra={"total": plan.total_steps, "checkpointed": steps.completed})
        try:
            stopped = await steps.run()
        except (CancelObserved, ReleaseNeeded) as stop:
            # A stopped final call's tokens are no checkpoint's: they count as an extra call's.
            streamed_usage = await self._stop_stream(run)
            run.usage_total = add_usage(steps.usage, streamed_usage)
            run.extra_usage = add_usage(steps.extra_usage, streamed_usage)
            await (self._cancel(run) if isinstance(stop, CancelObserved) else self._release(run))
            return
        except OutputWriteFailed as failed:
            failed_usage = failed.usage if isinstance(failed.usage, Usage) else None
            run.usage_total = add_usage(steps.usage, failed_usage)
            run.extra_usage = add_usage(steps.extra_usage, failed_usage)
            raise
        run.usage_total, run.extra_usage = stopped.usage, stopped.extra_usage
        if isinstance(stopped.error, TerminalProviderError):
            await self._fail(run, stopped.error.job_code)
        elif isinstance(stopped.error, FlexUnavailableError):
            # The steps it checkpointed are kept; a claim that wrote none bought nothing.
            await self._defer_flex_unavailable(run, stopped.error.retry_after, refund=not steps.progressed)
        elif isinstance(stopped.error, TransientProviderError):
            await self._retry_or_exhaust(run, stopped.error.retry_after)
        else:
            await self._succeed_steps(run, plan, stopped)

    async def _checkpoint_step(self, run: _Run, step: Step, completion: Completion) -> StepOutput:
        """The step's output, written once before progress moves; an earlier claim's wins."""
        output = StepOutput(
            job_id=run.job.job_id,
            step_id=step.step_id,
            output=completion.text,
            usage=completion.usage,
            output_attempt=completion.output_attempt,
        )
        expires_at = input_expiry(self._now(), self._settings.input_retention_hours)
        return await self._io(self._deps.steps.put_step, output, expires_at)

    async def _record_progress(
        self, run: _Run, completed: int, usage: Usage | None, extra_usage: Usage | None
    ) -> None:
        lease = Lease(
            token=run.lease.token, expires_at=self._now() + timedelta(seconds=self._settings.lease_seconds)
        )
        try:
            run.job = await self._io(
                self._deps.repository.record_progress, run.job.job_id, lease, completed, usage, extra_usage
            )
        except TransitionConflictError as conflict:
            raise LeaseLost from conflict
        await self._extend_slot(run, lease)
        run.last_heartbeat = time.monotonic()
        if run.job.status is JobStatus.CANCELLATION_REQUESTED:
            raise CancelObserved

    async def _succeed_steps(self, run: _Run, plan: StepPlan, stopped: StepsStopped) -> None:
        result = JobResult(
            job_id=run.job.job_id,
            output=final_output(plan, stopped.outputs),
            usage=stopped.usage,
            output_attempt=stopped.result_attempt,
        )
        location, stored, body = await self._store_result(run, result)
        await self._succeeded(run, location, stored, body)

    async def _succeeded(
        self, run: _Run, location: BlobLocation, stored: JobResult, body: str | None
    ) -> None:
        """The Succeeded write of a stored result (its attempt is the one readers show from then on)."""
        await self._terminal(
            run,
            JobStatus.SUCCEEDED,
            result_location=location,
            result_body=body,
            result_attempt=stored.output_attempt,
        )

    async def _answer(self, run: _Run, request: CompletionRequest) -> Completion:
        """The one step's answer, called or streamed. A structured answer that breaks its schema is
        asked again once in this claim (streamed, as the next output attempt); its tokens stay in
        `run.usage`, which ends up in the result's usage or in the write that ends the claim. The
        second such answer fails the job `invalid_output`."""
        try:
            return await self._ask(run, request)
        except InvalidAnswerError as first:
            run.usage = first.usage if isinstance(first.usage, Usage) else None
            logger.info("answer does not match the schema; asking again", extra={"problem": first.problem})
        if self._deadline - time.monotonic() < self._settings.provider_timeout_seconds:
            # A call started now could outlive the invocation and be paid for again.
            raise ReleaseNeeded
        try:
            second = await self._ask(run, request)
        except InvalidAnswerError as again:
            logger.info("answer does not match the schema again", extra={"problem": again.problem})
            raise invalid_output(again.usage) from None
        # The result carries every call it took: adopted later, it still counts the first one.
        refused, run.usage = run.usage, None
        return replace(second, usage=add_usage(refused, second.usage))

    async def _ask(self, run: _Run, request: CompletionRequest) -> Completion:
        """One call (streamed for a streaming job), its answer checked against its schema if any."""
        if run.job.stream:
            return await self._checked(request, self._stream_under_lease(run, request))
        return await self._call_under_lease(run, request)

    async def _checked(self, request: CompletionRequest, call: Awaitable[Completion]) -> Completion:
        """A streamed answer, checked against its schema on a model thread once it is complete (the
        text streamed as generated; what is kept is that text, once it proved valid)."""
        completion = await call
        if request.response_schema is None:
            return completion
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._deps.model_executor, checked, completion, request, self._deps.validator
        )

    async def _call_under_lease(self, run: _Run, request: CompletionRequest) -> Completion:
        """The model call, with heartbeats every few seconds and a watch on the invocation's deadline."""
        # Built off the event loop: the first build reads the secret and creates a client, which
        # would otherwise stall every other job's heartbeats in this batch.
        provider = await self._io(self._deps.provider)
        self._check_time_for(request)
        if time.monotonic() - run.last_heartbeat >= self._settings.heartbeat_seconds:
            # Slow to get here (a cold start): look for a cancel before spending a model call.
            await self._heartbeat(run)
        loop = asyncio.get_running_loop()
        return await self._watch(
            run,
            loop.run_in_executor(
                self._deps.model_executor, checked_answer, provider, self._deps.validator, request
            ),
        )

    async def _stream_under_lease(self, run: _Run, request: CompletionRequest) -> Completion:
        """The streaming call, watched like any call (heartbeats, the deadline); a stop from the
        watch (a cancel, the deadline, a lost lease) is the caller's to act on (`_stop_stream`)."""
        provider = await self._io(self._deps.provider)
        self._check_time_for(request)
        return await self._watch(run, self._start_stream(run, provider, request))

    def _start_stream(
        self, run: _Run, provider: ModelProvider, request: CompletionRequest
    ) -> asyncio.Future[Completion]:
        """The next output attempt, streamed into its events (a task: functions.worker.streaming)."""
        return asyncio.ensure_future(self._stream_call(run, provider, request))

    async def _stream_call(
        self, run: _Run, provider: ModelProvider, request: CompletionRequest
    ) -> Completion:
        # The attempt is taken by a heartbeat write before any event of it can exist.
        await self._heartbeat(run, self._deps.repository.take_output_attempt)
        expires_at = input_expiry(self._now(), self._settings.input_retention_hours)
        run.streaming = StreamingCall(self._deps, run.job.job_id, run.job.output_attempt, request, expires_at)
        return await run.streaming.run(provider)

    async def _stop_stream(self, run: _Run, *, lost: bool = False) -> Usage | None:
        """Stop the claim's streaming call, if one is still running, and return what it cost (the
        text it streamed stays readable unless the job was lost)."""
        streaming, run.streaming = run.streaming, None
        if streaming is None or streaming.ended:
            return None
        return await streaming.stop(lost=lost, wait_seconds=self._settings.heartbeat_seconds)

    async def _watch(self, run: _Run, call: Awaitable[Completion]) -> Completion:
        """Wait for a call, heartbeating every few seconds and watching the invocation's deadline."""
        call = asyncio.ensure_future(call)
        while True:
            budget = self._deadline - time.monotonic()
            done, _ = await asyncio.wait(
                {call}, timeout=max(0.0, min(self._settings.heartbeat_seconds, budget))
            )
            if done:
                return call.result()
            if time.monotonic() >= self._deadline:
                # The blocked thread finishes on its own (bounded by the SDK timeout); its answer
                # is simply never read.
                raise ReleaseNeeded
            await self._heartbeat(run)

    def _call_tier(self, job: JobRecord) -> Tier:
        """The tier the claim's calls go out at: a flex job's until flexFallbackSeconds since submit."""
        return call_tier(
            job.tier,
            job.created_at,
            self._now(),
            self._settings.flex_fallback_seconds,
            batch_fallback=job.batch_fallback,
        )

    def _call_timeout(self, tier: Tier) -> float:
        """How long a call at `tier` may take: a flex call may queue at the provider."""
        if tier is Tier.FLEX:
            return self._settings.flex_timeout_seconds
        return self._settings.provider_timeout_seconds

    def _check_time_for(self, request: CompletionRequest) -> None:
        """A flex call is not started with less than its timeout left before the release deadline:
        it could outlive the invocation and be paid for again."""
        if request.tier is Tier.FLEX and self._deadline - time.monotonic() < self._call_timeout(request.tier):
            raise ReleaseNeeded

    async def _heartbeat(self, run: _Run, write: Callable[[str, Lease], JobRecord] | None = None) -> None:
        """Extend the lease (with `write`: a heartbeat that also takes the next output attempt)."""
        lease = Lease(
            token=run.lease.token, expires_at=self._now() + timedelta(seconds=self._settings.lease_seconds)
        )
        try:
            run.job = await self._io(write or self._deps.repository.heartbeat, run.job.job_id, lease)
        except TransitionConflictError as conflict:
            raise LeaseLost from conflict
        await self._extend_slot(run, lease)
        run.last_heartbeat = time.monotonic()
        if run.job.status is JobStatus.CANCELLATION_REQUESTED:
            raise CancelObserved

    async def _succeed(self, run: _Run, completion: Completion, labels: tuple[str, ...] | None) -> None:
        output = _normalize_label(completion.text, labels)
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

    async def _fail(self, run: _Run, code: str) -> None:
        await self._terminal(run, JobStatus.FAILED, error=job_error(code))

    async def _cancel(self, run: _Run) -> None:
        await self._terminal(run, JobStatus.CANCELED)

    async def _terminal(
        self,
        run: _Run,
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
        now = self._now()
        # The input's final expiry before the terminal write (shared.retention): if it fails, the
        # job is handed back unfinished, and its next writer sets it.
        moved = await self._io(
            end_input, self._deps.payloads, run.job, target, now, self._settings.input_retention_hours
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
            run.job = await self._io(self._deps.repository.transition, transition)
            run.unsaved = None  # an inline result is stored with the status: nothing left to keep
        except TransitionConflictError as conflict:
            if _cancel_won(conflict, run):
                await self._terminal(
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

    async def _retry_or_exhaust(self, run: _Run, provider_hint: float | None) -> None:
        if run.job.stalls >= run.job.max_attempts:
            await self._fail(run, "retries_exhausted")
            return
        delay = backoff_seconds(
            run.job.attempts,
            self._settings.backoff_base_seconds,
            self._settings.backoff_cap_seconds,
            provider_hint,
            self._deps.random,
        )
        await self._back_to_pending(run, delay)

    async def _defer_flex_unavailable(self, run: _Run, provider_hint: float | None, *, refund: bool) -> None:
        """A deferral, not a stall: the flex tier had no capacity (429 `resource_unavailable`), so the
        job goes back to Pending with its claim's attempt given back (`refund`: the claim paid for
        no call), and never runs out of attempts this way; flexFallbackSeconds bounds the waiting,
        after which its calls go out at standard (DESIGN.md, "Cost tiers")."""
        delay = backoff_seconds(
            max(1, run.job.attempts),
            self._settings.backoff_base_seconds,
            self._settings.backoff_cap_seconds,
            provider_hint,
            self._deps.random,
        )
        metrics.add_metric(name="FlexDeferrals", unit="Count", value=1)
        await self._back_to_pending(run, delay, refund_attempt=refund)

    async def _release(self, run: _Run) -> None:
        """Near the Lambda timeout: hand the job back (never fail it) unless attempts are spent."""
        if run.job.stalls >= run.job.max_attempts:
            await self._fail(run, "retries_exhausted")
            return
        await self._back_to_pending(run, 1)

    async def _back_to_pending(self, run: _Run, delay: int, *, refund_attempt: bool = False) -> None:
        if run.job.status is JobStatus.CANCELLATION_REQUESTED:
            await self._cancel(run)
            return
        now = self._now()
        dispatch_at = now + timedelta(seconds=delay)
        transition = Transition(
            job_id=run.job.job_id,
            source=JobStatus.RUNNING,
            target=JobStatus.PENDING,
            now=now,
            lease_token=run.lease.token,
            dispatch_at=dispatch_at,
            # What this claim's calls cost and nothing recorded yet (a cut or stopped stream's
            # estimate, a refused answer whose Failed write did not happen); never the tokens of a
            # stored result, which the claim that adopts it counts.
            usage=None if run.usage_has_result else run.usage,
            usage_total=run.usage_total,
            extra_usage=run.extra_usage,
            refund_attempt=refund_attempt,
        )
        try:
            run.job = await self._io(self._deps.repository.transition, transition)
            run.unsaved = None  # an inline result is stored with the status: nothing left to keep
        except TransitionConflictError as conflict:
            if _cancel_won(conflict, run):
                await self._cancel(run)
            return
        # The worker dispatches what it put back to Pending (after the write: a message that
        # arrived before it would find the job Running and be dropped).
        await self._dispatch(run.job, run.message, delay)
        logger.info("job will retry", extra={"delay_seconds": delay, "attempt": run.job.attempts})

    async def _dispatch(self, job: JobRecord, message: JobMessage, delay: int) -> None:
        """A fresh message for the job's lane, due in `delay` seconds (SQS delays at most 900: a
        longer wait is deferred again by the claim it reaches early). Should the send fail, the
        message being handled is kept instead (RetryLater), and comes back after its visibility
        timeout: one receive more, for a fault, not for a healthy hand-back."""
        try:
            fresh = JobMessage.of(job, message.trace_id)  # the body received has no group: the job says it
            await self._io(self._deps.queues[Lane.of(job)].send, fresh, min(delay, MAX_DELAY_SECONDS))
        except Exception as error:
            logger.exception("the job could not be dispatched again; keeping its message")
            raise RetryLater from error

    async def _finish_pending_exhausted(self, job: JobRecord, now: datetime) -> None:
        moved = await self._io(
            end_input, self._deps.payloads, job, JobStatus.FAILED, now, self._settings.input_retention_hours
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
            await self._io(self._deps.repository.transition, transition)
        except TransitionConflictError:
            logger.info("exhausted job moved on before it could be failed")


def _waits_for_slot(job: JobRecord, lane: Lane, now: datetime) -> bool:
    """True when `job` refused the claim only for want of a running slot: claimable otherwise."""
    return (
        job.max_running > 0
        and job.status is JobStatus.PENDING
        and not (lane is Lane.SHARED and job.isolated)
        and job.stalls < job.max_attempts
        and job.dispatch_at <= now
    )


def _cancel_won(conflict: TransitionConflictError, run: _Run) -> bool:
    """True when the write lost only to a cancel request on a job we still hold; `run` adopts it."""
    current = conflict.current
    if (
        current is None
        or current.status is not JobStatus.CANCELLATION_REQUESTED
        or current.lease_token != run.lease.token
        or run.job.status is JobStatus.CANCELLATION_REQUESTED
    ):
        return False
    run.job = current
    return True


def _normalize_label(text: str, labels: tuple[str, ...] | None) -> str:
    """For classify, answer with the caller's spelling of a label when the model's casing differs."""
    if not labels:
        return text
    by_folded = {label.casefold(): label for label in labels}
    return by_folded.get(text.strip().strip(".").casefold(), text)
