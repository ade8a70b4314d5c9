"""A capped tenant's running slots as the worker holds them: taken with the claim, extended with
its lease, given back when the claim ends (DESIGN.md, "Fairness between tenants").

The slot store and its rules are shared.slots; this module is what one claim does with them. A
job refuses a claim without a slot, and its refusal (the job as it stood) says so for free; when
every slot of the tenant is held, the job is deferred with nothing written and no attempt charged.
"""

from __future__ import annotations

from datetime import datetime

from functions.worker.claimed_run import ClaimedRun
from functions.worker.handback import HandBack
from functions.worker.invocation import Invocation
from functions.worker.signals import ReleaseNeeded
from shared.fairness import message_group
from shared.job import JobRecord
from shared.lifecycle import JobStatus
from shared.observability import logger, metrics
from shared.ports import JobMessage, Lane, Lease
from shared.slots import SlotLostError, slot_retry_delay, take_any


class RunningSlots:
    """One invocation's use of the slot store; only a slot's own lease token can free it."""

    def __init__(self, invocation: Invocation, handback: HandBack) -> None:
        self._at = invocation
        self._handback = handback

    async def take(self, job: JobRecord, lease: Lease, now: datetime) -> int | None:
        """A free running slot of the job's tenant, carrying `lease`; None when every one is held."""
        return await self._at.io(
            take_any, self._at.deps.slots, message_group(job.tenant), job.max_running, lease, now
        )

    async def give_back(self, job: JobRecord, slot: int, lease: Lease) -> None:
        """The claim the slot was taken for was refused: free it now."""
        await self._at.io(self._at.deps.slots.release, message_group(job.tenant), slot, lease.token)

    async def defer(self, job: JobRecord, message: JobMessage) -> None:
        """Every running slot of the tenant is held: the job comes back later as a fresh delayed
        message (this one is deleted). Nothing is written and no attempt is charged: the job is
        still Pending and due, as it was."""
        wait = slot_retry_delay(self._at.settings.slot_retry_seconds, self._at.deps.random())
        metrics.add_metric(name="SlotDeferrals", unit="Count", value=1)
        logger.info(
            "deferred: every running slot of the tenant is held",
            extra={"delay_seconds": wait, "tenant": job.tenant},
        )
        await self._handback.dispatch(job, message, wait)

    async def extend(self, run: ClaimedRun, lease: Lease) -> None:
        """A heartbeat extends the running slot with the lease; a slot taken over (it expired
        before this heartbeat) means the cap no longer counts this job: hand it back."""
        if run.slot is None:
            return
        try:
            await self._at.io(self._at.deps.slots.extend, message_group(run.job.tenant), run.slot, lease)
        except SlotLostError as lost:
            logger.warning("the running slot was taken over after it expired; handing the job back")
            raise ReleaseNeeded from lost

    async def release(self, run: ClaimedRun) -> None:
        """The claim is over, however it ended: free its slot (only this lease's token can)."""
        if run.slot is None:
            return
        try:
            await self._at.io(
                self._at.deps.slots.release, message_group(run.job.tenant), run.slot, run.lease.token
            )
        except Exception:  # noqa: BLE001 - the slot frees itself at the lease's expiry anyway
            logger.warning("the running slot was not released; it frees when the lease expires")


def waits_for_slot(job: JobRecord, lane: Lane, now: datetime) -> bool:
    """True when `job` refused the claim only for want of a running slot: claimable otherwise."""
    return (
        job.max_running > 0
        and job.status is JobStatus.PENDING
        and not (lane is Lane.SHARED and job.isolated)
        and job.stalls < job.max_attempts
        and job.dispatch_at <= now
    )
