"""The worker under a running cap (DESIGN.md, "Fairness between tenants"): a capped tenant's job is
claimed only with a slot in hand, which it frees however the claim ends; no free slot defers the
job (a fresh delayed message, no attempt charged); an uncapped job never touches a slot."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

from shared.errors import TerminalProviderError
from shared.fairness import message_group
from shared.lifecycle import JobStatus
from shared.ports import JobMessage, Lane, Lease
from shared.slots import SlotLostError, effective_cap
from tests.slot_fakes import InMemorySlotStore
from tests.support.worker_world import TRACE, CountingProvider, World, handed_back

TENANT = "user:alice"


def _hold_every_slot(world: World, cap: int) -> list[Lease]:
    """Other claims of the tenant hold all its slots (their leases live a minute)."""
    leases = [Lease(f"other-{k}", world.clock.now() + timedelta(seconds=60)) for k in range(cap)]
    for slot, lease in enumerate(leases):
        assert world.slots.take(message_group(TENANT), slot, lease, world.clock.now())
    return leases


def test_an_uncapped_job_runs_without_touching_a_slot(world: World) -> None:
    job = world.job()

    world.deliver(job)

    assert world.current(job).status is JobStatus.SUCCEEDED
    assert world.slots.writes == []


def test_a_capped_job_runs_holding_a_slot_and_frees_it_when_it_ends(world: World) -> None:
    job = world.job(max_running=2)

    world.deliver(job)

    current = world.current(job)
    assert current.status is JobStatus.SUCCEEDED
    assert current.attempts == 1
    assert current.slot is not None
    assert world.slots.writes[0] == "take"
    assert world.slots.writes[-1] == "release"
    assert world.slots.held == {}


def test_a_slot_is_freed_when_the_claim_fails_the_job_too(world: World) -> None:
    world.provider.complete = _refuse  # type: ignore[method-assign]
    job = world.job(max_running=1)

    world.deliver(job)

    assert world.current(job).status is JobStatus.FAILED
    assert world.slots.held == {}


def _refuse(*_: object) -> None:
    raise TerminalProviderError("content_policy", "refused")


def test_no_free_slot_defers_the_job_without_charging_an_attempt(world: World) -> None:
    # Given a tenant capped at two whose two slots other claims hold
    _hold_every_slot(world, 2)
    job = world.job(max_running=2)

    # When its job's message arrives
    world.deliver(job)

    # Then the job is untouched (Pending, due, no attempt) and comes back as a fresh delayed message
    current = world.current(job)
    assert current.status is JobStatus.PENDING
    assert current.attempts == 0
    assert current.revision == job.revision
    [(message, delay)] = world.queues[Lane.SHARED].sent
    assert message == JobMessage(job_id=job.job_id, trace_id=TRACE, group=TENANT)
    assert delay == 5  # slotRetrySeconds, jittered by the world's fixed random
    assert world.provider.calls == []


def test_deferred_jobs_all_succeed_with_their_attempts_unchanged(world: World) -> None:
    # Given six jobs of a tenant capped at two, arriving while both slots are held
    held = _hold_every_slot(world, 2)
    jobs = [world.job(max_running=2) for _ in range(6)]
    for job in jobs:
        world.deliver(job)
    assert all(world.current(job).attempts == 0 for job in jobs)
    assert len(world.queues[Lane.SHARED].sent) == len(jobs)

    # When the holders end, and the deferred messages come back
    for slot, lease in enumerate(held):
        assert world.slots.release(message_group(TENANT), slot, lease.token)
    world.queues[Lane.SHARED].sent.clear()
    for job in jobs:
        world.deliver(job)

    # Then every job succeeded on its first attempt, and no slot is left held
    assert [world.current(job).status for job in jobs] == [JobStatus.SUCCEEDED] * len(jobs)
    assert [world.current(job).attempts for job in jobs] == [1] * len(jobs)
    assert world.slots.held == {}


def test_a_slot_taken_for_a_claim_that_then_loses_is_given_back(world: World) -> None:
    # Given a capped job another worker already claimed
    job = world.job(max_running=1)
    world.deliver(job)
    assert world.current(job).status is JobStatus.SUCCEEDED
    writes = len(world.slots.writes)

    # When a duplicate message arrives for it
    world.deliver(job)

    # Then the finished job's refusal needs no slot at all
    assert world.slots.writes[writes:] == []
    assert world.slots.held == {}


def test_the_cap_copied_at_submit_is_the_tenants_own_else_the_stage_default() -> None:
    assert effective_cap(None, 0) == 0
    assert effective_cap(None, 4) == 4
    assert effective_cap(2, 4) == 2
    assert effective_cap(0, 4) == 0  # an operator's 0 lifts the stage's cap for this tenant


class TakenOverSlots(InMemorySlotStore):
    """A slot that expired before its heartbeat, and another claim took it over."""

    def extend(self, group: str, slot: int, lease: Lease) -> None:
        raise SlotLostError


def test_a_heartbeat_that_finds_its_slot_taken_over_hands_the_job_back(
    make_world: Callable[..., World],
) -> None:
    # Given a capped job whose model call outlasts a heartbeat, and a slot lost by then
    gate = threading.Event()
    world = make_world(provider=CountingProvider(gate=gate))
    world.slots = TakenOverSlots()
    job = world.job(max_running=1)

    # When the job runs
    world.deliver(job)

    # Then it is handed back to Pending (it is no longer counted: it must not run on), not failed
    handed_back(world, job)
    gate.set()
