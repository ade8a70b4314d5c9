"""The worker's streaming path with in-memory ports (DESIGN.md, "Streaming output"): each claim that
streams takes the next output attempt, writes gapless events that join to its result, and keeps the
retry, cancel, lease, deadline and usage rules of every other call."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from functions.worker.service import JobWorker
from shared.adapters.sqs_queue import encode_message
from shared.contract import Operation
from shared.errors import StorageUnavailableError, TransientProviderError
from shared.job import JobInput, JobRecord, JobResult, Usage
from shared.lifecycle import JobStatus
from shared.output import OutputEvent
from shared.plan_parameters import PlanParameters
from shared.planner import estimate_call_usage, plan_job
from shared.ports import (
    Completion,
    CompletionRequest,
    JobMessage,
    Lane,
    Lease,
    StreamControl,
    StreamStopped,
    TextSink,
    Transition,
)
from shared.prompts import template_for
from tests.fakes import InMemoryJobRepository, job_record
from tests.output_fakes import InMemoryOutputEventStore
from tests.support.worker_world import TRACE, USAGE, World, handed_back, redrive

PIECES = (" Once", " upon", " a", " time", ", the end.\n")


class StreamingModel:
    """A streaming model: its pieces one by one, then its usage report. It can cut its first
    `cuts` streams after two pieces, leave the usage report out, or pause after `pause_after` pieces
    until `resume` is set, stopping (as the SDK's reader does) as soon as the worker asks."""

    def __init__(
        self,
        pieces: tuple[str, ...] = PIECES,
        *,
        cuts: int = 0,
        usage: Usage | None = USAGE,
        pause_after: int | None = None,
    ) -> None:
        self.pieces = pieces
        self.cuts = cuts
        self.usage = usage
        self.pause_after = pause_after
        self.resume = threading.Event()
        self.paused = threading.Event()
        self.streams: list[CompletionRequest] = []
        self.completions: list[CompletionRequest] = []
        self.stopped_early = 0

    def complete(self, request: CompletionRequest) -> Completion:
        self.completions.append(request)
        return Completion(text="a part", usage=USAGE)

    def stream(self, request: CompletionRequest, on_text: TextSink, control: StreamControl) -> Completion:
        self.streams.append(request)
        received: list[str] = []
        for index, piece in enumerate(self.pieces):
            if index == self.pause_after:
                self.paused.set()
                while not self.resume.wait(0.01):
                    if control.stopped:
                        self.stopped_early += 1
                        raise StreamStopped(estimate_call_usage(request.messages, "".join(received)))
            on_text(piece)
            received.append(piece)
            if control.stopped:
                self.stopped_early += 1
                raise StreamStopped(estimate_call_usage(request.messages, "".join(received)))
            if self.cuts and index == 1:
                self.cuts -= 1
                raise TransientProviderError(
                    "cut", usage=estimate_call_usage(request.messages, "".join(received))
                )
        text = "".join(received)
        usage = self.usage or estimate_call_usage(request.messages, text)
        return Completion(text=text.strip(), usage=usage)


def streaming_job(world: World, **overrides: object) -> JobRecord:
    return world.job(stream=True, **overrides)


def joined(events: list[OutputEvent]) -> str:
    assert [event.seq for event in events] == list(range(1, len(events) + 1)), "seq must be gapless from 1"
    return "".join(event.text for event in events)


def result_of(world: World, job: JobRecord) -> JobResult:
    current = world.current(job)
    if current.result_body is not None:
        result = current.inline_result()
        assert result is not None
        return result
    found = world.payloads.find_result(job.job_id)
    assert found is not None
    return found[1]


def test_a_streaming_job_writes_one_attempt_of_gapless_events_that_join_to_its_result(
    make_world: Callable[..., World],
) -> None:
    # Given a streaming job
    world = make_world(provider=StreamingModel())
    job = streaming_job(world)

    # When the worker runs it
    world.deliver(job)

    # Then it took output attempt 1, streamed (no plain call), and its events join to its result
    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert (done.output_attempt, done.result_attempt) == (1, 1)
    events = world.events.of(job.job_id, 1)
    assert joined(events) == result_of(world, job).output == "Once upon a time, the end."
    assert result_of(world, job).output_attempt == 1
    # And the first text was written at once, on its own
    assert events[0].text == "Once"
    assert isinstance(world.provider, StreamingModel)
    assert world.provider.completions == []
    assert done.usage == USAGE


def test_streaming_costs_one_job_write_more_the_heartbeat_that_takes_the_attempt(
    make_world: Callable[..., World],
) -> None:
    world = make_world(provider=StreamingModel())
    job = streaming_job(world)

    world.deliver(job)

    # The claim, the attempt (a heartbeat: the notifier does not push it), the terminal write
    assert world.repository.writes == ["create_job", "transition", "take_output_attempt", "transition"]


def test_a_job_that_does_not_stream_writes_no_events(make_world: Callable[..., World]) -> None:
    world = make_world(provider=StreamingModel())
    job = world.job()

    world.deliver(job)

    assert world.current(job).status is JobStatus.SUCCEEDED
    assert world.events.writes == []
    assert world.current(job).output_attempt == 0


def test_a_stream_cut_mid_way_is_retried_as_a_new_attempt_whose_text_replaces_the_first(
    make_world: Callable[..., World],
) -> None:
    # Given a model that cuts the first stream after two pieces
    world = make_world(provider=StreamingModel(cuts=1))
    job = streaming_job(world)

    # When the worker runs it, and again once it is due
    world.deliver(job)
    cut = handed_back(world, job)
    world.clock.set(cut.dispatch_at)
    world.deliver(job)

    # Then the cut attempt holds what it received, and the result is the second attempt's
    assert joined(world.events.of(job.job_id, 1)) == "Once upon"
    done = world.current(job)
    assert (done.status, done.output_attempt, done.result_attempt) == (JobStatus.SUCCEEDED, 2, 2)
    assert joined(world.events.of(job.job_id, 2)) == result_of(world, job).output
    # And the cut call's tokens count, by estimate and flagged as such
    assert cut.usage is not None
    assert cut.usage.estimated is True
    assert done.usage is not None
    assert done.usage.estimated is True
    assert done.usage.input_tokens == cut.usage.input_tokens + USAGE.input_tokens


def test_a_stream_without_a_usage_report_counts_an_estimate(make_world: Callable[..., World]) -> None:
    world = make_world(provider=StreamingModel(usage=None))
    job = streaming_job(world)

    world.deliver(job)

    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert done.usage is not None
    assert done.usage.estimated is True
    assert done.usage.output_tokens == -(-len("".join(PIECES).encode()) // 4)
    assert done.status_document().usage is not None
    assert done.status_document().usage.estimated is True  # type: ignore[union-attr]


def _cancel_when_paused(world: World, job: JobRecord, model: StreamingModel) -> threading.Thread:
    def cancel() -> None:
        assert model.paused.wait(5)
        running = world.current(job)
        world.repository.transition(
            Transition(
                job_id=job.job_id,
                source=running.status,
                target=JobStatus.CANCELLATION_REQUESTED,
                now=world.clock.now(),
                cancel_requested_at=world.clock.now(),
            )
        )

    thread = threading.Thread(target=cancel)
    thread.start()
    return thread


def test_a_cancel_stops_the_stream_and_keeps_its_text_and_its_cost(make_world: Callable[..., World]) -> None:
    # Given a streaming job whose model pauses after three pieces, and a cancel then
    model = StreamingModel(pause_after=3)
    world = make_world(provider=model)
    job = streaming_job(world)
    canceler = _cancel_when_paused(world, job, model)

    # When the worker runs it
    world.deliver(job)
    canceler.join()

    # Then the next heartbeat saw the cancel and the stream was stopped (the model stopped generating)
    done = world.current(job)
    assert done.status is JobStatus.CANCELED
    assert model.stopped_early == 1
    # And the text streamed so far is readable, and what the call cost is counted, by estimate
    assert joined(world.events.of(job.job_id, 1)) == "Once upon a"
    assert done.usage is not None
    assert done.usage.estimated is True
    assert done.result_attempt is None


def test_the_deadline_stops_the_stream_and_releases_the_job_with_its_cost(
    make_world: Callable[..., World],
) -> None:
    # Given a stream that pauses and an invocation whose release deadline comes during the pause
    model = StreamingModel(pause_after=2)
    world = make_world(provider=model)
    job = streaming_job(world)
    worker = JobWorker(world.deps(), time.monotonic() + 0.3, solo=True)

    import asyncio  # noqa: PLC0415 - one test drives the worker with its own deadline

    asyncio.run(worker.handle(encode_message(JobMessage(job_id=job.job_id, trace_id=TRACE)), Lane.SHARED))

    # Then the job is released (not failed), the call stopped, its text kept and its cost counted
    released = handed_back(world, job)
    assert model.stopped_early == 1
    assert joined(world.events.of(job.job_id, 1)) == "Once upon"
    assert released.usage is not None
    assert released.usage.estimated is True


class FailingEvents(InMemoryOutputEventStore):
    """The events table refuses its third write request (once)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0

    def put_event(self, event: OutputEvent, expires_at: datetime) -> None:
        self.requests += 1
        if self.requests == 3:
            raise StorageUnavailableError("throttled")
        super().put_event(event, expires_at)


def test_an_event_that_cannot_be_written_stops_the_call_and_hands_the_job_back(
    make_world: Callable[..., World],
) -> None:
    # Given pieces of 16 bytes, each flushed on its own (streamFlushBytes 16), and a write that fails
    pieces = tuple(f" piece number {n:02d}"[:16] for n in range(5))
    world = make_world(provider=StreamingModel(pieces=pieces), STREAM_FLUSH_BYTES="16")
    world.events = FailingEvents()
    job = streaming_job(world)

    # When the worker runs it, then again once due
    world.deliver(job)
    failed = handed_back(world, job)
    world.clock.set(failed.dispatch_at)
    world.deliver(job)

    # Then the first attempt stopped at its last gapless event (its cost counted), the second is the result
    assert [e.seq for e in world.events.of(job.job_id, 1)] == [1, 2]
    assert failed.usage is not None
    assert failed.usage.estimated is True
    done = world.current(job)
    assert (done.status, done.result_attempt) == (JobStatus.SUCCEEDED, 2)
    assert joined(world.events.of(job.job_id, 2)) == result_of(world, job).output


def test_a_lost_lease_stops_the_stream_and_writes_nothing_more(make_world: Callable[..., World]) -> None:
    # Given a stream that pauses, and another claim taking the job meanwhile (its lease expired)
    model = StreamingModel(pause_after=2)
    world = make_world(provider=model)
    job = streaming_job(world)

    def steal() -> None:
        assert model.paused.wait(5)
        world.repository.jobs[job.job_id] = world.current(job).model_copy(update={"lease_token": "other"})

    thief = threading.Thread(target=steal)
    thief.start()
    world.deliver(job)
    thief.join()

    # Then the stream was stopped, and nothing past what was written before the loss was written
    assert model.stopped_early == 1
    assert joined(world.events.of(job.job_id, 1)) == "Once"
    assert world.current(job).status is JobStatus.RUNNING  # the other holder's


def test_a_redriven_streaming_job_streams_a_new_attempt_that_outranks_the_old_one(
    make_world: Callable[..., World],
) -> None:
    # Given a streaming job that ran once (attempt 1), then failed and was redriven by an operator
    world = make_world(provider=StreamingModel())
    job = streaming_job(world)
    world.deliver(job)
    world.repository.jobs[job.job_id] = world.current(job).model_copy(
        update={
            "status": JobStatus.FAILED,
            "result_location": None,
            "result_body": None,
            "result_attempt": None,
        }
    )
    redrive(world, job)
    world.payloads.results.clear()

    # When it runs again
    world.deliver(job)

    # Then its counter went on (never reset) and the new attempt is the result
    done = world.current(job)
    assert (done.output_attempt, done.result_attempt) == (2, 2)
    assert joined(world.events.of(job.job_id, 2)) == result_of(world, job).output
    assert done.result_attempt == 2


def test_a_result_an_earlier_attempt_stored_is_adopted_with_its_attempt(
    make_world: Callable[..., World],
) -> None:
    # Given attempt 1 stored its result but lost its lease before recording it; attempt 2 was taken too
    world = make_world(provider=StreamingModel())
    job = streaming_job(world, attempts=1, output_attempt=2)
    stored = JobResult(job_id=job.job_id, output="Earlier text.", usage=USAGE, output_attempt=1)
    world.payloads.put_result(stored, "item", job.expires_at)

    # When the next claim runs it
    world.deliver(job)

    # Then it adopts that result, names attempt 1 as the result's, and streams nothing
    done = world.current(job)
    assert (done.status, done.result_attempt, done.output_attempt) == (JobStatus.SUCCEEDED, 1, 2)
    assert isinstance(world.provider, StreamingModel)
    assert world.provider.streams == []


PLAN = PlanParameters(chunk_tokens=1000, step_output_tokens=100)


def test_a_multi_step_job_streams_only_its_final_call(make_world: Callable[..., World]) -> None:
    # Given a long streaming job (map steps, then a final reduce)
    model = StreamingModel()
    world = make_world(provider=model, STEP_CONCURRENCY="1", PROVIDER_TIMEOUT_SECONDS="10")
    text = "\n\n".join(f"Part {n}: " + "the ledger moved as planned. " * 140 for n in range(1, 4))
    plan = plan_job(text, Operation.SUMMARIZE, PLAN, prompt_version=template_for(Operation.SUMMARIZE).version)
    assert plan.total_steps > 2
    job = job_record(world.clock.now(), plan=PLAN, total_steps=plan.total_steps, stream=True)
    world.repository.create_job(job, job.dispatch_at + timedelta(minutes=15))
    world.payloads.put_input(JobInput(job_id=job.job_id, text=text), "item", job.expires_at)

    # When the worker runs it
    world.deliver(job)

    # Then the steps before the last were plain calls, checkpointed; the last streamed attempt 1
    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert len(model.completions) == plan.total_steps - 1
    assert len(model.streams) == 1
    assert done.result_attempt == 1
    assert joined(world.events.of(job.job_id, 1)) == result_of(world, job).output
    final = world.steps.steps[(job.job_id, plan.steps[-1].step_id)]
    assert final.output_attempt == 1


def test_a_heartbeat_that_finds_the_lease_gone_before_the_attempt_is_taken_streams_nothing(
    make_world: Callable[..., World],
) -> None:
    class LosesAtTheAttempt(InMemoryJobRepository):
        def take_output_attempt(self, job_id: str, lease: Lease) -> JobRecord:
            self.jobs[job_id] = self.jobs[job_id].model_copy(update={"lease_token": "other"})
            return super().take_output_attempt(job_id, lease)

    model = StreamingModel()
    world = make_world(provider=model, repository=LosesAtTheAttempt())
    job = streaming_job(world)

    world.deliver(job)

    assert model.streams == []
    assert world.events.writes == []
