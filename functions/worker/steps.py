"""A multi-step job's run inside one claim: the missing steps, a few at a time, under one lease.

DESIGN.md, "Long inputs: jobs in checkpointed steps". The loop starts every step whose inputs
are ready (at most `concurrency` at once; the worker's model thread pool bounds the whole
invocation), checkpoints each answer as it comes (its `checkpoint` hook writes the step once,
then `progress` moves the job's progress on, which also extends the lease), and heartbeats the
lease when no answer came for a while. Steps already checkpointed by any earlier claim are
adopted, never called again.

It stops starting steps at the first provider failure, lets the steps in flight finish and
checkpoint, and returns: the caller then fails the job (a terminal failure) or hands it back
(a transient one). It never starts a call it could not see answered before the invocation's
deadline (less time left than `call_timeout`, the provider's): such a call would be abandoned
and paid for again by the next claim. Once no step may start for that reason, it lets the steps
in flight finish and checkpoint, then raises ReleaseNeeded. Should the deadline come anyway
(a checkpoint write that hangs), it raises ReleaseNeeded then; a heartbeat or progress write
that finds a cancel or a lost lease raises CancelObserved or LeaseLost. Answers still in flight
then are abandoned (their threads end with the SDK's timeout).

extract's steps answer under a schema (functions.worker.structured): an answer is validated
before it is checkpointed. One that breaks its schema is no checkpoint (its tokens join the extra
usage) and its step is started once more in this claim, like any ready step; a second such answer
of the same step fails the job `invalid_output`, and an answer cut by its token limit
`output_truncated`, as terminal failures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from functions.worker.signals import ReleaseNeeded
from functions.worker.structured import invalid_output, response_schema
from shared.errors import InvalidAnswerError, ProviderError, TerminalProviderError
from shared.job import StepOutput, Usage, add_usage
from shared.planner import Step, StepPlan, ready_steps, step_messages
from shared.ports import Completion, CompletionRequest
from shared.tiers import Tier

# Starts one step's call: the worker streams a streaming job's final step, calls the others.
StartCall = Callable[[Step, CompletionRequest], "asyncio.Future[Completion]"]
Checkpoint = Callable[[Step, Completion], Awaitable[StepOutput]]
Progress = Callable[[int, Usage | None, Usage | None], Awaitable[None]]
Heartbeat = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class StepsStopped:
    """Where the loop ended: every step's output so far, the job's usage (the checkpoints' and the
    extra calls'), the extra calls' alone, what stopped it (None: every step is done), and the
    output attempt that streamed the final step's checkpoint (a streaming job's result's)."""

    outputs: Mapping[str, str]
    usage: Usage | None
    extra_usage: Usage | None
    error: ProviderError | None
    result_attempt: int | None = None


def step_request(
    plan: StepPlan,
    step: Step,
    done: Mapping[str, StepOutput],
    *,
    model: str,
    tier: Tier,
    cache_key: str | None,
) -> CompletionRequest:
    """The call of a ready step, its children's checkpointed outputs rendered in."""
    return CompletionRequest(
        model=model,
        messages=step_messages(plan, step, [done[child].output for child in step.inputs]),
        max_output_tokens=step.max_tokens,
        response_schema=response_schema(plan, step),
        tier=tier,
        cache_key=cache_key,
    )


class StepLoop:
    """One claim's pass over a plan; `run` returns once no step is running and none may start."""

    def __init__(
        self,
        plan: StepPlan,
        model: str,
        checkpoints: Mapping[str, StepOutput],
        *,
        extra_usage: Usage | None,
        concurrency: int,
        heartbeat_seconds: float,
        deadline: float,
        call_timeout: float,
        tier: Tier,
        cache_key: str | None,
        monotonic: Callable[[], float],
        start_call: StartCall,
        checkpoint: Checkpoint,
        progress: Progress,
        heartbeat: Heartbeat,
    ) -> None:
        planned = {step.step_id for step in plan.steps}
        self._plan = plan
        self._model = model
        self._done: dict[str, StepOutput] = {
            step_id: output for step_id, output in checkpoints.items() if step_id in planned
        }
        self._concurrency = concurrency
        self._heartbeat_seconds = heartbeat_seconds
        self._deadline = deadline
        self._call_timeout = call_timeout
        self._tier = tier  # every call of this claim goes out at it (shared.tiers)
        self._cache_key = cache_key
        self._adopted = len(self._done)  # checkpoints earlier claims wrote
        self._monotonic = monotonic  # the clock `deadline` is on (time.monotonic)
        self._out_of_time = False  # a ready step was not started: the deadline is too close
        self._start_call = start_call
        self._checkpoint = checkpoint
        self._progress = progress
        self._heartbeat = heartbeat
        self._in_flight: dict[asyncio.Future[Completion], Step] = {}
        # Tokens of calls whose answers are no checkpoint (JobRecord.extra_usage): the earlier
        # claims' as the job carries them, and this claim's.
        self._extra_usage = extra_usage
        self._error: ProviderError | None = None
        self._reasked: set[str] = set()  # steps whose answer broke their schema once in this claim
        self._last_beat = monotonic()

    @property
    def completed(self) -> int:
        """Steps with a checkpoint, adopted or written by this claim."""
        return len(self._done)

    @property
    def progressed(self) -> bool:
        """True once this claim checkpointed a step of its own."""
        return len(self._done) > self._adopted

    @property
    def usage(self) -> Usage | None:
        """Every checkpoint's usage, and the extra calls' (a refused call that reported usage)."""
        return add_usage(*(output.usage for output in self._done.values()), self._extra_usage)

    @property
    def extra_usage(self) -> Usage | None:
        """The tokens of calls whose answers are not checkpoints, this claim's and earlier ones'."""
        return self._extra_usage

    async def run(self) -> StepsStopped:
        """Run the missing steps; see the module docstring for how it ends."""
        while True:
            if self._error is None:
                self._start_ready()
            if not self._in_flight:
                if self._out_of_time:
                    raise ReleaseNeeded
                break
            budget = self._deadline - self._monotonic()
            wait = max(0.0, min(self._heartbeat_seconds, budget))
            done, _ = await asyncio.wait(self._in_flight, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                await self._finished(self._in_flight.pop(future), future)
            if not done and self._monotonic() >= self._deadline:
                raise ReleaseNeeded
            if self._monotonic() - self._last_beat >= self._heartbeat_seconds:
                await self._heartbeat()
                self._last_beat = self._monotonic()
        outputs = {step_id: output.output for step_id, output in self._done.items()}
        final = self._plan.final_step
        checkpoint = self._done.get(final.step_id) if final is not None else None
        return StepsStopped(
            outputs=outputs,
            usage=self.usage,
            extra_usage=self._extra_usage,
            error=self._error,
            result_attempt=checkpoint.output_attempt if checkpoint is not None else None,
        )

    def _start_ready(self) -> None:
        running = set(self._in_flight.values())
        for step in ready_steps(self._plan, self._done):
            if len(self._in_flight) >= self._concurrency:
                return
            if step in running:
                continue
            if self._deadline - self._monotonic() < self._call_timeout:
                self._out_of_time = True
                return
            request = step_request(
                self._plan, step, self._done, model=self._model, tier=self._tier, cache_key=self._cache_key
            )
            self._in_flight[self._start_call(step, request)] = step

    async def _finished(self, step: Step, future: asyncio.Future[Completion]) -> None:
        error = future.exception()
        if error is None:
            await self._kept(step, future.result())
            return
        if not isinstance(error, ProviderError):
            raise error  # not the provider's answer: the worker hands the job back
        # A call refused after generating, cut mid-stream or answered off its schema was billed all
        # the same: its tokens count as an extra call's.
        usage = getattr(error, "usage", None)
        if isinstance(usage, Usage):
            self._extra_usage = add_usage(self._extra_usage, usage)
        if isinstance(error, TerminalProviderError):
            self._error = error  # a terminal answer wins over a transient one: retrying cannot help
        elif isinstance(error, InvalidAnswerError):
            # No checkpoint: the step stays ready, and starts again unless this was its second try
            # in this claim.
            if step.step_id in self._reasked:
                self._error = invalid_output()
            else:
                self._reasked.add(step.step_id)
        elif not isinstance(self._error, TerminalProviderError):
            self._error = self._error or error

    async def _kept(self, step: Step, completion: Completion) -> None:
        stored = await self._checkpoint(step, completion)
        if (stored.output, stored.usage) != (completion.text, completion.usage):
            # Another claim checkpointed this step first: its answer stands, and this call
            # was paid for all the same.
            self._extra_usage = add_usage(self._extra_usage, completion.usage)
        self._done[step.step_id] = stored
        await self._progress(self.completed, self.usage, self._extra_usage)
        self._last_beat = self._monotonic()  # a progress write extends the lease too
