"""Handing a claimed job back to Pending, and dispatching it again with a fresh delayed message.

A job handed back (a transient failure's backoff, a release near the invocation's timeout, an
error of the worker's own) is dispatched by a fresh message, never by keeping the one being
handled: the queue's receive count then counts crashes only, and the redrive policy never
dead-letters a healthy job (DESIGN.md, "Delivery and execution"). The Pending write comes first:
a message that arrived before it would find the job Running and be dropped.
"""

from __future__ import annotations

from datetime import timedelta

from functions.worker.backoff import backoff_seconds
from functions.worker.claimed_run import ClaimedRun, cancel_won
from functions.worker.invocation import Invocation
from functions.worker.signals import RetryLater
from functions.worker.terminal import TerminalWrites
from shared.job import JobRecord
from shared.lifecycle import JobStatus
from shared.observability import logger
from shared.ports import JobMessage, Lane, Transition, TransitionConflictError
from shared.resources import MAX_DELAY_SECONDS


class HandBack:
    """The hand-backs of a claim, each conditional on its lease; a cancel requested meanwhile wins."""

    def __init__(self, invocation: Invocation, terminal: TerminalWrites) -> None:
        self._at = invocation
        self._terminal = terminal

    async def retry_or_exhaust(self, run: ClaimedRun, provider_hint: float | None) -> None:
        """A stall: back to Pending after a backoff, or Failed once its attempts are spent."""
        if run.job.stalls >= run.job.max_attempts:
            await self._terminal.fail(run, "retries_exhausted")
            return
        settings = self._at.settings
        delay = backoff_seconds(
            run.job.attempts,
            settings.backoff_base_seconds,
            settings.backoff_cap_seconds,
            provider_hint,
            self._at.deps.random,
        )
        await self.back_to_pending(run, delay)

    async def release(self, run: ClaimedRun) -> None:
        """Near the Lambda timeout: hand the job back (never fail it) unless attempts are spent."""
        if run.job.stalls >= run.job.max_attempts:
            await self._terminal.fail(run, "retries_exhausted")
            return
        await self.back_to_pending(run, 1)

    async def back_to_pending(self, run: ClaimedRun, delay: int, *, refund_attempt: bool = False) -> None:
        """Pending again, due in `delay` seconds, with what the claim spent; then its fresh message."""
        if run.job.status is JobStatus.CANCELLATION_REQUESTED:
            await self._terminal.cancel(run)
            return
        now = self._at.now()
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
            run.job = await self._at.io(self._at.deps.repository.transition, transition)
            run.unsaved = None  # an inline result is stored with the status: nothing left to keep
        except TransitionConflictError as conflict:
            if cancel_won(conflict, run):
                await self._terminal.cancel(run)
            return
        # The worker dispatches what it put back to Pending (after the write: a message that
        # arrived before it would find the job Running and be dropped).
        await self.dispatch(run.job, run.message, delay)
        logger.info("job will retry", extra={"delay_seconds": delay, "attempt": run.job.attempts})

    async def dispatch(self, job: JobRecord, message: JobMessage, delay: int) -> None:
        """A fresh message for the job's lane, due in `delay` seconds (SQS delays at most 900: a
        longer wait is deferred again by the claim it reaches early). Should the send fail, the
        message being handled is kept instead (RetryLater), and comes back after its visibility
        timeout: one receive more, for a fault, not for a healthy hand-back."""
        try:
            fresh = JobMessage.of(job, message.trace_id)  # the body received has no group: the job says it
            await self._at.io(self._at.deps.queues[Lane.of(job)].send, fresh, min(delay, MAX_DELAY_SECONDS))
        except Exception as error:
            logger.exception("the job could not be dispatched again; keeping its message")
            raise RetryLater from error
