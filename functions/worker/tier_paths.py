"""What a job's cost tier changes in a claim (DESIGN.md, "Cost tiers"): the tier its calls go out
at, how long one may take, the flex tier's deferral when the provider has no capacity, and the
batch tier's hand-off of the ready calls to the batcher.

Apart from the spine (functions.worker.service), which runs a standard call the same way whatever
the tier: a flex call is a standard one with a longer timeout until flexFallbackSeconds since
submit, after which it is a standard call; a batch job's claim ends once its calls are sent, the
job Running under a hold until the batch poller hands it back.
"""

from __future__ import annotations

import time

from functions.worker.backoff import backoff_seconds
from functions.worker.claimed_run import ClaimedRun
from functions.worker.handback import HandBack
from functions.worker.invocation import Invocation
from functions.worker.lease_keeping import LeaseKeeper
from functions.worker.one_step import one_step_request
from functions.worker.signals import LeaseLost, ReleaseNeeded
from functions.worker.steps import step_request
from functions.worker.terminal import TerminalWrites
from shared.batches import BatchCall, hold_expiry
from shared.job import JobInput, JobRecord, add_usage
from shared.lifecycle import JobStatus
from shared.observability import logger, metrics
from shared.planner import StepPlan, ready_steps
from shared.ports import CompletionRequest, Lease, TransitionConflictError
from shared.prompts import cache_key
from shared.tiers import Tier, call_tier


class TierPaths:
    """The tier-dependent parts of one invocation's claims."""

    def __init__(
        self, invocation: Invocation, terminal: TerminalWrites, handback: HandBack, lease: LeaseKeeper
    ) -> None:
        self._at = invocation
        self._terminal = terminal
        self._handback = handback
        self._lease = lease

    def call_tier(self, job: JobRecord) -> Tier:
        """The tier the claim's calls go out at: a flex job's until flexFallbackSeconds since submit."""
        return call_tier(
            job.tier,
            job.created_at,
            self._at.now(),
            self._at.settings.flex_fallback_seconds,
            batch_fallback=job.batch_fallback,
        )

    def call_timeout(self, tier: Tier) -> float:
        """How long a call at `tier` may take: a flex call may queue at the provider."""
        if tier is Tier.FLEX:
            return self._at.settings.flex_timeout_seconds
        return self._at.settings.provider_timeout_seconds

    def check_time_for(self, request: CompletionRequest) -> None:
        """A flex call is not started with less than its timeout left before the release deadline:
        it could outlive the invocation and be paid for again."""
        if request.tier is Tier.FLEX and self._at.deadline - time.monotonic() < self.call_timeout(
            request.tier
        ):
            raise ReleaseNeeded

    async def defer_flex_unavailable(
        self, run: ClaimedRun, provider_hint: float | None, *, refund: bool
    ) -> None:
        """A deferral, not a stall: the flex tier had no capacity (429 `resource_unavailable`), so the
        job goes back to Pending with its claim's attempt given back (`refund`: the claim paid for
        no call), and never runs out of attempts this way; flexFallbackSeconds bounds the waiting,
        after which its calls go out at standard (DESIGN.md, "Cost tiers")."""
        settings = self._at.settings
        delay = backoff_seconds(
            max(1, run.job.attempts),
            settings.backoff_base_seconds,
            settings.backoff_cap_seconds,
            provider_hint,
            self._at.deps.random,
        )
        metrics.add_metric(name="FlexDeferrals", unit="Count", value=1)
        await self._handback.back_to_pending(run, delay, refund_attempt=refund)

    async def hand_to_batcher(self, run: ClaimedRun, plan: StepPlan, job_input: JobInput) -> bool:
        """A batch job's ready calls go to the batcher, and the claim ends with the job Running,
        waiting on the provider batch under a hold (DESIGN.md, "Cost tiers"). False when it has no
        call left to make (every step checkpointed): the caller finishes it as usual."""
        from functions.worker.provider import chat_arguments  # noqa: PLC0415 - the batch tier only

        job = run.job
        if plan.total_steps == 1:
            calls = [(plan.steps[0], one_step_request(job, plan, job_input, self.call_tier(job)))]
        else:
            done = await self._at.io(self._at.deps.steps.get_steps, job.job_id, self._at.now())
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
                await self._lease.record_progress(run, len(done), usage, job.extra_usage)
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
        hold = Lease(token=run.lease.token, expires_at=hold_expiry(self._at.now()))
        try:
            run.job = await self._at.io(self._at.deps.repository.hold_for_batch, job.job_id, hold)
        except TransitionConflictError as conflict:
            raise LeaseLost from conflict
        if run.job.status is JobStatus.CANCELLATION_REQUESTED:
            await self._terminal.cancel(run)
            return True
        try:
            await self._at.io(self._at.deps.batch_calls.send, batch_calls)
        except Exception:  # noqa: BLE001 - the queue is down: the job is handed back, not left waiting
            logger.exception("the calls could not be handed to the batcher; handing the job back")
            await self._handback.back_to_pending(run, 1)
            return True
        metrics.add_metric(name="BatchHandoffs", unit="Count", value=1)
        logger.info("job waits on a provider batch", extra={"calls": len(batch_calls)})
        return True
