"""Keeping a claim's lease alive while its calls run: heartbeats, progress writes, and the watch on
the invocation's deadline.

No lock is held across a model call: the lease is what says the job is still this worker's, so
every few seconds a conditional write extends it (and the running slot with it, if the claim holds
one). The same write is how the worker learns of a cancel (CancelObserved) or of a lease another
worker took over (LeaseLost); the deadline's watch hands the job back before Lambda's timeout
(ReleaseNeeded) rather than lose it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

from functions.worker.claimed_run import ClaimedRun
from functions.worker.invocation import Invocation
from functions.worker.running_slots import RunningSlots
from functions.worker.signals import CancelObserved, LeaseLost, ReleaseNeeded
from shared.job import JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.ports import Completion, Lease, TransitionConflictError


class LeaseKeeper:
    """The lease's writes for one invocation: each extends it by leaseSeconds from now."""

    def __init__(self, invocation: Invocation, slots: RunningSlots) -> None:
        self._at = invocation
        self._slots = slots

    async def heartbeat(
        self, run: ClaimedRun, write: Callable[[str, Lease], JobRecord] | None = None
    ) -> None:
        """Extend the lease (with `write`: a heartbeat that also takes the next output attempt)."""
        lease = self._next_lease(run)
        try:
            run.job = await self._at.io(write or self._at.deps.repository.heartbeat, run.job.job_id, lease)
        except TransitionConflictError as conflict:
            raise LeaseLost from conflict
        await self._held(run, lease)

    async def record_progress(
        self, run: ClaimedRun, completed: int, usage: Usage | None, extra_usage: Usage | None
    ) -> None:
        """A multi-step job's progress (its checkpointed steps and their tokens), which extends the
        lease as a heartbeat does."""
        lease = self._next_lease(run)
        try:
            run.job = await self._at.io(
                self._at.deps.repository.record_progress, run.job.job_id, lease, completed, usage, extra_usage
            )
        except TransitionConflictError as conflict:
            raise LeaseLost from conflict
        await self._held(run, lease)

    async def watch(self, run: ClaimedRun, call: Awaitable[Completion]) -> Completion:
        """Wait for a call, heartbeating every few seconds and watching the invocation's deadline."""
        call = asyncio.ensure_future(call)
        while True:
            budget = self._at.deadline - time.monotonic()
            done, _ = await asyncio.wait(
                {call}, timeout=max(0.0, min(self._at.settings.heartbeat_seconds, budget))
            )
            if done:
                return call.result()
            if time.monotonic() >= self._at.deadline:
                # The blocked thread finishes on its own (bounded by the SDK timeout); its answer
                # is simply never read.
                raise ReleaseNeeded
            await self.heartbeat(run)

    def _next_lease(self, run: ClaimedRun) -> Lease:
        return Lease(
            token=run.lease.token,
            expires_at=self._at.now() + timedelta(seconds=self._at.settings.lease_seconds),
        )

    async def _held(self, run: ClaimedRun, lease: Lease) -> None:
        """After a lease write: the slot goes with it, and a cancel it found stops the run."""
        await self._slots.extend(run, lease)
        run.last_heartbeat = time.monotonic()
        if run.job.status is JobStatus.CANCELLATION_REQUESTED:
            raise CancelObserved
