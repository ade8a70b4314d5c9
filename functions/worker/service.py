"""The worker use case: claim a job atomically, call the model under a lease, record the outcome.

No transaction or lock is held across the model call: the claim is one conditional write,
the lease is kept alive by heartbeats, and every later write is conditional on the lease
token, so a worker that lost its job can never overwrite the one that has it.

Whatever goes wrong inside the worker that is not a provider's answer (storage errors, a
secret that cannot be read, an unknown prompt version, a bug) hands the job back to Pending
with backoff instead of leaving it Running until the sweeper; an answer the model already gave
is kept as the job's result first, and the next claim adopts it instead of paying again.

This module is the spine: the claim, what the claim runs (one call, the steps of a multi-step
job, or a batch job's hand-off) and how each provider outcome ends it. The parts it composes:
functions.worker.terminal (the terminal writes), .handback (back to Pending, fresh messages),
.running_slots (a capped tenant's slots), .lease_keeping (heartbeats, the deadline's watch),
.tier_paths (the flex deferral, the batch hand-off) and .model_calls (called or streamed).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import replace
from datetime import timedelta

from functions.worker.claimed_run import ClaimedRun
from functions.worker.dependencies import WorkerDependencies
from functions.worker.handback import HandBack
from functions.worker.invocation import Invocation
from functions.worker.lease_keeping import LeaseKeeper
from functions.worker.model_calls import ModelCalls
from functions.worker.one_step import one_step_request
from functions.worker.running_slots import RunningSlots, waits_for_slot
from functions.worker.signals import CancelObserved, LeaseLost, OutputWriteFailed, ReleaseNeeded, RetryLater
from functions.worker.steps import StepLoop
from functions.worker.structured import invalid_output
from functions.worker.terminal import TerminalWrites
from functions.worker.tier_paths import TierPaths
from shared.errors import (
    FlexUnavailableError,
    InvalidAnswerError,
    TerminalProviderError,
    TransientProviderError,
)
from shared.job import JobInput, JobRecord, StepOutput, Usage, add_usage
from shared.lifecycle import JobStatus
from shared.messages import parse_job_message
from shared.observability import bind_job_in_task, logger, metrics
from shared.payload_reads import input_of
from shared.planner import Step, StepPlan, plan_of
from shared.ports import (
    Completion,
    CompletionRequest,
    JobMessage,
    Lane,
    Lease,
    Transition,
    TransitionConflictError,
)
from shared.prompts import cache_key
from shared.retention import input_expiry, input_needs_renewal
from shared.tiers import Tier

__all__ = ["JobWorker", "RetryLater"]


class JobWorker:
    """Processes one queue message at a time; many run concurrently in one invocation.

    `solo` says the invocation's batch held one record: a claim records it, so that a crash
    under this claim is charged to this job alone (shared.leases).
    """

    def __init__(self, deps: WorkerDependencies, deadline: float, *, solo: bool) -> None:
        # `deadline`: the time.monotonic() after which in-flight jobs are released.
        self._at = Invocation(deps, deadline)
        self._deps = deps
        self._settings = deps.settings
        self._solo = solo
        self._terminal = TerminalWrites(self._at)
        self._handback = HandBack(self._at, self._terminal)
        self._slots = RunningSlots(self._at, self._handback)
        self._lease = LeaseKeeper(self._at, self._slots)
        self._tiers = TierPaths(self._at, self._terminal, self._handback, self._lease)
        self._calls = ModelCalls(self._at, self._lease, self._tiers)

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
                await self._slots.release(run)

    async def _park(self, lane: Lane, body: str, reason: str, job_id: str | None) -> None:
        # Poison: no retry can fix it, so it goes to the DLQ now instead of after maxReceiveCount.
        await self._at.io(self._deps.queues[lane].send_to_dlq, body, reason, job_id)
        metrics.add_metric(name="PoisonMessages", unit="Count", value=1)
        logger.warning("poison message parked on the DLQ", extra={"reason": reason})

    async def _claim(self, message: JobMessage, body: str, lane: Lane) -> ClaimedRun | None:
        """One conditional UpdateItem, no read first: when it is refused, the job as it stood
        (ReturnValuesOnConditionCheckFailure) says why."""
        now = self._at.now()
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
            claimed = await self._at.io(self._deps.repository.transition, claim)
        except TransitionConflictError as refused:
            # A capped tenant's job refuses a claim without a slot; its refusal says so for free.
            if refused.current is not None and waits_for_slot(refused.current, lane, now):
                return await self._claim_with_slot(
                    refused.current, claim, lease, message, body=body, lane=lane
                )
            await self._refused(refused.current, message, body=body, lane=lane)
            return None
        # DEBUG: the one INFO line of a job's run is "job finished" (every line is billed).
        logger.debug("claimed", extra={"attempt": claimed.attempts, "solo": self._solo, "lane": lane.value})
        return ClaimedRun(job=claimed, lease=lease, message=message)

    async def _claim_with_slot(
        self, job: JobRecord, claim: Transition, lease: Lease, message: JobMessage, *, body: str, lane: Lane
    ) -> ClaimedRun | None:
        """A capped tenant's job: a running slot first, carrying this claim's lease, then the same
        claim holding it (DESIGN.md, "Fairness between tenants"). No free slot: deferred."""
        slot = await self._slots.take(job, lease, claim.now)
        if slot is None:
            await self._slots.defer(job, message)
            return None
        try:
            claimed = await self._at.io(self._deps.repository.transition, replace(claim, slot=slot))
        except TransitionConflictError as refused:
            await self._slots.give_back(job, slot, lease)
            await self._refused(refused.current, message, body=body, lane=lane)
            return None
        logger.debug("claimed", extra={"attempt": claimed.attempts, "slot": slot, "lane": lane.value})
        return ClaimedRun(job=claimed, lease=lease, message=message, slot=slot)

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
            await self._terminal.finish_pending_exhausted(job)
        elif job.dispatch_at > (now := self._at.now()):
            # Early: a wait longer than SQS's longest delay, or a duplicate while the job backs off.
            # Come back when it is due, as a fresh message (this one is deleted).
            wait = max(1, int((job.dispatch_at - now).total_seconds() + 0.999))
            await self._handback.dispatch(job, message, wait)
        else:
            # It was claimable when read back: another worker won the race and then let go.
            logger.info("claim lost")

    async def _execute(self, run: ClaimedRun) -> None:
        try:
            await self._run_claimed(run)
        except RetryLater:
            raise
        except LeaseLost:
            logger.warning("lease lost during the model call; writing nothing more")
            await self._calls.stop_stream(run, lost=True)
        except Exception:  # noqa: BLE001 - whatever it is, the job must not stay Running
            # Not a provider's answer: storage, a secret, the provider client, a prompt, a bug.
            logger.exception("the worker failed while running the job; handing it back")
            metrics.add_metric(name="WorkerErrors", unit="Count", value=1)
            stopped = await self._calls.stop_stream(run)
            if run.job.total_steps == 1 and stopped is not None:
                run.usage = stopped  # what the stopped call cost goes with the hand-back
            await self._terminal.checkpoint_answer(run)
            await self._handback.retry_or_exhaust(run, provider_hint=None)

    async def _run_claimed(self, run: ClaimedRun) -> None:
        job = run.job
        await self._renew_input_of_old_job(job)
        if await self._adopt_earlier_result(run):
            return
        # A small input came with the claim (no read); a larger one is read from its item or S3.
        job_input = await self._at.io(input_of, job, self._deps.payloads)
        if job_input is None:
            await self._terminal.fail(run, "input_missing")
            return
        # The same plan as at submit: the same text and the parameters stored on the job.
        plan = plan_of(job, job_input)
        if self._tiers.call_tier(job) is Tier.BATCH and await self._tiers.hand_to_batcher(
            run, plan, job_input
        ):
            return
        if plan.total_steps > 1:
            await self._run_steps(run, plan)
            return
        await self._run_one_step(run, plan, job_input)

    async def _run_one_step(self, run: ClaimedRun, plan: StepPlan, job_input: JobInput) -> None:
        """A one-step job: its one call (asked again once if structured and off its schema), then
        the outcome."""
        request = one_step_request(run.job, plan, job_input, self._tiers.call_tier(run.job))
        # `run.usage` may hold a refused structured answer's tokens already (`_answer`): whatever
        # ends the claim adds its own to them.
        try:
            completion = await self._answer(run, request)
        except FlexUnavailableError as error:
            # Nothing generated, nothing billed: this claim bought nothing unless a first answer
            # (refused by its schema) was paid for.
            await self._tiers.defer_flex_unavailable(run, error.retry_after, refund=run.usage is None)
        except TransientProviderError as error:
            # A stream cut mid-way generated (and was billed for) part of an answer: counted by estimate.
            run.usage = add_usage(run.usage, error.usage if isinstance(error.usage, Usage) else None)
            await self._handback.retry_or_exhaust(run, error.retry_after)
        except TerminalProviderError as error:
            run.usage = add_usage(run.usage, error.usage if isinstance(error.usage, Usage) else None)
            await self._terminal.fail(run, error.job_code)
        except CancelObserved:
            run.usage = add_usage(run.usage, await self._calls.stop_stream(run))
            await self._terminal.cancel(run)
        except ReleaseNeeded:
            run.usage = add_usage(run.usage, await self._calls.stop_stream(run))
            await self._handback.release(run)
        except OutputWriteFailed as failed:
            run.usage = add_usage(run.usage, failed.usage if isinstance(failed.usage, Usage) else None)
            raise
        else:
            await self._terminal.succeed(run, completion, job_input.labels)

    async def _renew_input_of_old_job(self, job: JobRecord) -> None:
        retention = self._settings.input_retention_hours
        now = self._at.now()
        if input_needs_renewal(job, now, retention):
            await self._at.io(
                self._deps.payloads.set_input_expiry,
                job.job_id,
                job.input_location,
                input_expiry(now, retention),
            )

    async def _adopt_earlier_result(self, run: ClaimedRun) -> bool:
        """Finish the job with a result an earlier claim stored but never recorded; True if so."""
        if run.job.attempts <= 1 and run.job.redrive_count == 0 and run.job.tier is not Tier.BATCH:
            # The first claim of this run of the job: nobody wrote a result before (but a batch job's
            # poller, whose hand-back gives the attempt back).
            return False
        found = await self._at.io(self._deps.payloads.find_result, run.job.job_id)
        if found is None:
            return False
        await self._terminal.adopt(run, *found)
        return True

    async def _run_steps(self, run: ClaimedRun, plan: StepPlan) -> None:
        """A multi-step job: the steps no claim checkpointed yet (functions.worker.steps), then the
        outcome: Succeeded with the final output, Failed on a terminal step, handed back otherwise."""
        job = run.job
        now = self._at.now()
        checkpoints = await self._at.io(self._deps.steps.get_steps, job.job_id, now)
        retention = self._settings.input_retention_hours
        if checkpoints and input_needs_renewal(job, now, retention):
            await self._at.io(
                self._deps.steps.set_steps_expiry, job.job_id, list(checkpoints), input_expiry(now, retention)
            )
        provider = await self._at.io(self._deps.provider)
        streamed = plan.final_step if job.stream else None
        tier = self._tiers.call_tier(job)

        def start_call(step: Step, request: CompletionRequest) -> asyncio.Future[Completion]:
            # A streaming job streams its final call only; the steps before it are checkpointed as ever.
            # Every answer is checked against its step's schema (extract) before it may be kept.
            if step == streamed:
                return asyncio.ensure_future(
                    self._calls.checked(request, self._calls.start_stream(run, provider, request))
                )
            return self._calls.start_call(provider, request)

        steps = StepLoop(
            plan,
            job.model,
            checkpoints,
            extra_usage=job.extra_usage,
            concurrency=self._settings.step_concurrency,
            heartbeat_seconds=self._settings.heartbeat_seconds,
            deadline=self._at.deadline,
            call_timeout=self._tiers.call_timeout(tier),
            tier=tier,
            cache_key=cache_key(job.tenant, job.operation, job.prompt_version),
            monotonic=time.monotonic,
            start_call=start_call,
            checkpoint=lambda step, completion: self._checkpoint_step(run, step, completion),
            progress=lambda completed, usage, extra: self._lease.record_progress(
                run, completed, usage, extra
            ),
            heartbeat=lambda: self._lease.heartbeat(run),
        )
        logger.debug("steps", extra={"total": plan.total_steps, "checkpointed": steps.completed})
        try:
            stopped = await steps.run()
        except (CancelObserved, ReleaseNeeded) as stop:
            # A stopped final call's tokens are no checkpoint's: they count as an extra call's.
            streamed_usage = await self._calls.stop_stream(run)
            run.usage_total = add_usage(steps.usage, streamed_usage)
            run.extra_usage = add_usage(steps.extra_usage, streamed_usage)
            if isinstance(stop, CancelObserved):
                await self._terminal.cancel(run)
            else:
                await self._handback.release(run)
            return
        except OutputWriteFailed as failed:
            failed_usage = failed.usage if isinstance(failed.usage, Usage) else None
            run.usage_total = add_usage(steps.usage, failed_usage)
            run.extra_usage = add_usage(steps.extra_usage, failed_usage)
            raise
        run.usage_total, run.extra_usage = stopped.usage, stopped.extra_usage
        if isinstance(stopped.error, TerminalProviderError):
            await self._terminal.fail(run, stopped.error.job_code)
        elif isinstance(stopped.error, FlexUnavailableError):
            # The steps it checkpointed are kept; a claim that wrote none bought nothing.
            await self._tiers.defer_flex_unavailable(
                run, stopped.error.retry_after, refund=not steps.progressed
            )
        elif isinstance(stopped.error, TransientProviderError):
            await self._handback.retry_or_exhaust(run, stopped.error.retry_after)
        else:
            await self._terminal.succeed_steps(run, plan, stopped)

    async def _checkpoint_step(self, run: ClaimedRun, step: Step, completion: Completion) -> StepOutput:
        """The step's output, written once before progress moves; an earlier claim's wins."""
        output = StepOutput(
            job_id=run.job.job_id,
            step_id=step.step_id,
            output=completion.text,
            usage=completion.usage,
            output_attempt=completion.output_attempt,
        )
        expires_at = input_expiry(self._at.now(), self._settings.input_retention_hours)
        return await self._at.io(self._deps.steps.put_step, output, expires_at)

    async def _answer(self, run: ClaimedRun, request: CompletionRequest) -> Completion:
        """The one step's answer, called or streamed. A structured answer that breaks its schema is
        asked again once in this claim (streamed, as the next output attempt); its tokens stay in
        `run.usage`, which ends up in the result's usage or in the write that ends the claim. The
        second such answer fails the job `invalid_output`."""
        try:
            return await self._ask(run, request)
        except InvalidAnswerError as first:
            run.usage = first.usage if isinstance(first.usage, Usage) else None
            logger.info("answer does not match the schema; asking again", extra={"problem": first.problem})
        if self._at.deadline - time.monotonic() < self._settings.provider_timeout_seconds:
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

    async def _ask(self, run: ClaimedRun, request: CompletionRequest) -> Completion:
        """One call (streamed for a streaming job), its answer checked against its schema if any."""
        if run.job.stream:
            return await self._calls.checked(request, self._stream_under_lease(run, request))
        return await self._call_under_lease(run, request)

    # The two ways a claim's answer arrives, as methods of their own: the chaos shim
    # (outlast/chaos/shim.py) wraps them to kill the worker right after an answer is received.
    async def _call_under_lease(self, run: ClaimedRun, request: CompletionRequest) -> Completion:
        """The model call, with heartbeats every few seconds and a watch on the invocation's deadline."""
        return await self._calls.call(run, request)

    async def _stream_under_lease(self, run: ClaimedRun, request: CompletionRequest) -> Completion:
        """The streaming call, watched like any call; a stop from the watch is the caller's to act on."""
        return await self._calls.stream(run, request)
