"""The worker at the flex tier (DESIGN.md, "Cost tiers"): a call the flex tier has no capacity for
is a deferral, not a stall (no attempt spent, however many); after flexFallbackSeconds since submit
the job's calls go out at standard; no flex call starts with less than its timeout left."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from shared.contract import Operation
from shared.errors import FlexUnavailableError
from shared.job import JobInput, JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.planner import plan_job
from shared.ports import Completion, CompletionRequest
from shared.prompts import cache_key, template_for
from shared.tiers import Tier
from tests.fakes import job_record
from tests.support.worker_world import World, handed_back
from tests.unit.test_worker_service import PLAN

FALLBACK_SECONDS = 600


class FlexBusy:
    """A provider whose flex tier has no capacity for the first `busy` flex calls."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.calls: list[CompletionRequest] = []

    def complete(self, request: CompletionRequest) -> Completion:
        self.calls.append(request)
        if request.tier is Tier.FLEX and self.busy > 0:
            self.busy -= 1
            raise FlexUnavailableError("no capacity", retry_after=None)
        return Completion(
            text="The summary.",
            usage=Usage(input_tokens=10, output_tokens=2, tiers=frozenset({request.tier})),
        )


@pytest.fixture
def flex_world(make_world: Callable[..., World]) -> Callable[[int], World]:
    def make(busy: int) -> World:
        return make_world(
            provider=FlexBusy(busy),
            FLEX_TIMEOUT_SECONDS="30",
            FLEX_FALLBACK_SECONDS=str(FALLBACK_SECONDS),
            MAX_ATTEMPTS="3",
        )

    return make


def test_a_flex_job_that_meets_no_capacity_is_deferred_with_its_attempt_given_back(
    flex_world: Callable[[int], World],
) -> None:
    world = flex_world(2)
    job = world.job(tier=Tier.FLEX)

    world.deliver(job)

    deferred = handed_back(world, job)
    assert (deferred.attempts, deferred.stalls) == (0, 0)
    assert [call.tier for call in world.provider.calls] == [Tier.FLEX]


def test_more_refusals_than_max_attempts_never_exhaust_the_job(flex_world: Callable[[int], World]) -> None:
    world = flex_world(5)
    job = world.job(tier=Tier.FLEX)

    for _ in range(5):
        world.deliver(job)
        world.clock.set(handed_back(world, job).dispatch_at)
    world.deliver(job)

    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert done.attempts == 1  # the one claim that called the model and got an answer
    assert done.usage is not None
    assert done.usage.tiers == {Tier.FLEX}


def test_after_the_fallback_the_call_goes_out_at_standard_and_the_usage_says_so(
    flex_world: Callable[[int], World],
) -> None:
    world = flex_world(100)
    job = world.job(tier=Tier.FLEX)
    world.deliver(job)
    handed_back(world, job)

    world.clock.advance(timedelta(seconds=FALLBACK_SECONDS))
    world.deliver(job)

    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert [call.tier for call in world.provider.calls] == [Tier.FLEX, Tier.STANDARD]
    assert done.usage is not None
    assert done.usage.tiers == {Tier.STANDARD}


def test_a_standard_job_never_asks_for_flex(flex_world: Callable[[int], World]) -> None:
    world = flex_world(100)
    job = world.job()

    world.deliver(job)

    assert world.current(job).status is JobStatus.SUCCEEDED
    assert [call.tier for call in world.provider.calls] == [Tier.STANDARD]


def test_no_flex_call_starts_with_less_than_its_timeout_left(make_world: Callable[..., World]) -> None:
    # The worker's invocation has 60 s left (World.deliver); a flex call may take 90.
    world = make_world(provider=FlexBusy(0), FLEX_TIMEOUT_SECONDS="90")
    job = world.job(tier=Tier.FLEX)

    world.deliver(job)

    released = handed_back(world, job)
    assert world.provider.calls == []
    assert released.attempts == 1  # a release keeps its attempt: it is not a deferral


def test_every_call_carries_the_cache_key_of_its_tenant_operation_and_prompt_version(
    flex_world: Callable[[int], World],
) -> None:
    world = flex_world(0)
    job = world.job(tier=Tier.FLEX)

    world.deliver(job)

    [asked] = world.provider.calls
    assert asked.cache_key == cache_key(job.tenant, job.operation, job.prompt_version)
    assert job.tenant not in (asked.cache_key or "")


class FlexBusyFromPartThree(FlexBusy):
    """Answers parts 1-2 at flex, then has no flex capacity for anything else."""

    def complete(self, request: CompletionRequest) -> Completion:
        if request.tier is Tier.FLEX and "Part 3:" in request.messages[-1]["content"]:
            self.busy = max(self.busy, 1)
        return super().complete(request)


def long_job(world: World, tier: Tier = Tier.FLEX) -> JobRecord:
    text = "\n\n".join(f"Part {n}: " + "the ledger moved as planned. " * 140 for n in range(1, 7))
    plan = plan_job(text, Operation.SUMMARIZE, PLAN, prompt_version=template_for(Operation.SUMMARIZE).version)
    job = job_record(world.clock.now(), plan=PLAN, total_steps=plan.total_steps, tier=tier)
    world.repository.create_job(job, job.dispatch_at + timedelta(minutes=15))
    world.payloads.put_input(JobInput(job_id=job.job_id, text=text), "item", job.expires_at)
    return job


def test_a_claim_that_checkpointed_steps_keeps_its_attempt_when_it_defers(
    make_world: Callable[..., World],
) -> None:
    # Given a long flex job, one step at a time, whose third part finds no flex capacity
    world = make_world(
        provider=FlexBusyFromPartThree(0), STEP_CONCURRENCY="1", FLEX_TIMEOUT_SECONDS="10", MAX_ATTEMPTS="3"
    )
    job = long_job(world)

    world.deliver(job)

    # Then the two steps it paid for are kept, and the claim that paid for them counts
    deferred = handed_back(world, job)
    assert deferred.completed_steps == 2
    assert (deferred.attempts, deferred.stalls) == (1, 0)


def test_a_long_job_whose_first_step_finds_no_capacity_gives_its_attempt_back(
    make_world: Callable[..., World],
) -> None:
    world = make_world(provider=FlexBusy(1), STEP_CONCURRENCY="1", FLEX_TIMEOUT_SECONDS="10")
    job = long_job(world)

    world.deliver(job)

    deferred = handed_back(world, job)
    assert (deferred.completed_steps, deferred.attempts, deferred.stalls) == (0, 0, 0)
