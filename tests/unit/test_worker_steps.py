"""A claim's step loop against the invocation's deadline: it never starts a model call it could not
see answered before the deadline (DESIGN.md, "Long inputs"), so no call is paid, abandoned and
paid again. Time is a fake monotonic clock that each answer moves on."""

from __future__ import annotations

import asyncio

import pytest

from functions.worker.signals import ReleaseNeeded
from functions.worker.steps import StepLoop, StepsStopped
from shared.contract import Operation
from shared.job import StepOutput, Usage
from shared.plan_parameters import PlanParameters
from shared.planner import Step, StepPlan, plan_job
from shared.ports import Completion, CompletionRequest
from shared.prompts import template_for
from shared.tiers import Tier

CALL_SECONDS = 3.0  # how long each fake answer takes
CALL_TIMEOUT = 4.0  # the provider's timeout: what a call may take at most


def long_plan() -> StepPlan:
    """Six map chunks and their reduces."""
    text = "\n\n".join(f"Part {n}: " + "the ledger moved as planned. " * 140 for n in range(6))
    plan = plan_job(
        text,
        Operation.SUMMARIZE,
        PlanParameters(chunk_tokens=1000, step_output_tokens=100),
        prompt_version=template_for(Operation.SUMMARIZE).version,
    )
    assert len(plan.map_steps) >= 6
    return plan


class SlowModel:
    """Answers every call at once, but moves the clock on by CALL_SECONDS per answer."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls: list[CompletionRequest] = []

    def monotonic(self) -> float:
        return self.now

    def start(self, step: Step, request: CompletionRequest) -> asyncio.Future[Completion]:
        self.calls.append(request)
        self.now += CALL_SECONDS
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        future.set_result(Completion(text="a part", usage=Usage(input_tokens=10, output_tokens=2)))
        return future


def run_loop(plan: StepPlan, model: SlowModel, *, deadline: float, concurrency: int = 1) -> StepsStopped:
    written: dict[str, StepOutput] = {}

    async def checkpoint(step: Step, completion: Completion) -> StepOutput:
        written[step.step_id] = StepOutput(
            job_id="j", step_id=step.step_id, output=completion.text, usage=completion.usage
        )
        return written[step.step_id]

    async def nothing(*_: object) -> None:
        return None

    loop = StepLoop(
        plan,
        "gpt-4o-mini",
        {},
        extra_usage=None,
        concurrency=concurrency,
        heartbeat_seconds=1_000,
        deadline=deadline,
        call_timeout=CALL_TIMEOUT,
        tier=Tier.STANDARD,
        cache_key=None,
        monotonic=model.monotonic,
        start_call=model.start,
        checkpoint=checkpoint,
        progress=nothing,
        heartbeat=nothing,
    )
    return asyncio.run(loop.run())


def test_no_call_starts_when_less_time_is_left_than_a_call_may_take() -> None:
    # Given an invocation whose deadline is closer than the provider's timeout
    model = SlowModel()

    # When the loop runs, it releases the job without calling the model
    with pytest.raises(ReleaseNeeded):
        run_loop(long_plan(), model, deadline=CALL_TIMEOUT - 0.5, concurrency=4)

    assert model.calls == []


def test_calls_start_while_one_can_finish_then_the_job_is_released() -> None:
    # Given 10 s before the deadline, calls of 3 s and a provider timeout of 4 s
    model = SlowModel()

    # When the loop runs one step at a time
    with pytest.raises(ReleaseNeeded):
        run_loop(long_plan(), model, deadline=10.0)

    # Then it started calls at 0, 3 and 6 s (each with at least 4 s left), not at 9 s
    assert len(model.calls) == 3
    assert model.now == 9.0


def test_with_time_enough_every_step_is_called_once() -> None:
    plan = long_plan()
    model = SlowModel()

    stopped = run_loop(plan, model, deadline=CALL_SECONDS * len(plan.steps) + CALL_TIMEOUT)

    assert stopped.error is None
    assert set(stopped.outputs) == {step.step_id for step in plan.steps}
    assert len(model.calls) == len(plan.steps)
