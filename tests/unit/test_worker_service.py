"""The worker with in-memory ports: errors that are not the provider's hand the job back, answers
are never paid for twice, and claims tell their refusals apart without a read first."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from functions.worker.service import RetryLater
from shared.contract import Operation
from shared.errors import StorageUnavailableError, TerminalProviderError
from shared.job import BlobLocation, JobInput, JobRecord, JobResult, Usage
from shared.lifecycle import JobStatus
from shared.plan_parameters import PlanParameters
from shared.planner import plan_job
from shared.ports import Completion, CompletionRequest, JobMessage, Lane, Lease, Transition
from shared.prompts import template_for
from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore, job_record
from tests.support.worker_world import (
    TRACE,
    USAGE,
    CountingProvider,
    RecordingQueue,
    World,
    handed_back,
    redrive,
)

# --- claims ------------------------------------------------------------------------------------


def test_a_claim_records_whether_its_invocation_held_this_job_alone(world: World) -> None:
    alone, batched = world.job(), world.job()

    world.deliver(alone, solo=True)
    world.deliver(batched, solo=False)

    assert world.current(alone).solo is True
    assert world.current(batched).solo is False
    assert world.current(alone).status is world.current(batched).status is JobStatus.SUCCEEDED


def test_a_message_of_an_unknown_job_is_parked_on_its_own_lanes_dlq(world: World) -> None:
    ghost = job_record(world.clock.now())  # never written

    world.deliver(ghost, Lane.ISOLATION)

    assert world.queues[Lane.ISOLATION].parked == [("unknown_job", ghost.job_id)]
    assert world.queues[Lane.SHARED].parked == []
    assert world.provider.calls == []


def test_a_shared_queue_message_of_an_isolated_job_is_dropped(world: World) -> None:
    # Given a job that crashed a batch and now runs only from the isolation queue
    job = world.job(isolated=True)

    # When a stale message from the shared queue arrives
    world.deliver(job, Lane.SHARED)

    # Then it is dropped (deleted) with no claim and no model call
    assert world.current(job) == job
    assert world.provider.calls == []
    assert world.queues[Lane.SHARED].sent == world.queues[Lane.ISOLATION].sent == []

    # And its isolation-queue message runs it
    world.deliver(job, Lane.ISOLATION, solo=True)
    assert world.current(job).status is JobStatus.SUCCEEDED


def test_an_early_delivery_is_sent_again_delayed_until_the_job_is_due(world: World) -> None:
    job = world.job(dispatch_at=world.clock.now() + timedelta(seconds=30))

    world.deliver(job)

    assert world.queues[Lane.SHARED].sent == [
        (JobMessage(job_id=job.job_id, trace_id=TRACE, group=job.tenant), 30)
    ]
    assert world.current(job) == job


def test_a_wait_longer_than_sqs_delays_is_deferred_again_when_its_message_arrives(world: World) -> None:
    # Given a job that backs off for 1,000 s, longer than SQS's longest delay (900 s)
    job = world.job(dispatch_at=world.clock.now() + timedelta(seconds=1000))

    # When its message arrives, then the one it sent, 900 s later
    world.deliver(job)
    world.clock.advance(timedelta(seconds=900))
    world.deliver(job)

    # Then each arrival sent it on by at most 900 s, the second by what was left; nothing ran it
    sent = [delay for _, delay in world.queues[Lane.SHARED].sent]
    assert sent == [900, 100]
    assert world.current(job) == job
    assert world.provider.calls == []


def test_an_isolated_job_is_handed_back_to_the_isolation_queue(make_world: Callable[..., World]) -> None:
    world = make_world(provider=BrokenSecret())
    job = world.job(isolated=True)

    world.deliver(job, Lane.ISOLATION, solo=True)

    handed_back(world, job)
    assert world.queues[Lane.SHARED].sent == []


class UnsendableQueue(RecordingQueue):
    def send(self, message: JobMessage, delay_seconds: int = 0) -> None:
        raise StorageUnavailableError("SQS is throttling")


def test_a_hand_back_whose_fresh_message_cannot_be_sent_keeps_the_message_it_came_with(
    make_world: Callable[..., World],
) -> None:
    # Given a failure that hands the job back, and a queue that refuses the fresh message
    world = make_world(provider=BrokenSecret())
    world.queues[Lane.SHARED] = UnsendableQueue()
    job = world.job()

    # When the job runs, the worker keeps its message (it comes back after its visibility timeout)
    with pytest.raises(RetryLater):
        world.deliver(job)

    # ... and the job is Pending, due when that message can dispatch it
    assert world.current(job).status is JobStatus.PENDING


def test_a_job_out_of_attempts_fails_and_its_input_expires_a_retention_later(world: World) -> None:
    job = world.job(attempts=3, max_attempts=3)

    world.deliver(job)

    failed = world.current(job)
    assert (failed.status, failed.error and failed.error.code) == (JobStatus.FAILED, "retries_exhausted")
    assert world.payloads.expires_at[("input", job.job_id, "item")] == world.clock.now() + timedelta(hours=24)
    assert world.provider.calls == []


# --- errors that are not the provider's ---------------------------------------------------------


class FlakyHeartbeats(InMemoryJobRepository):
    def heartbeat(self, job_id: str, lease: Lease) -> JobRecord:
        raise StorageUnavailableError("throttled")


def test_a_storage_error_on_a_heartbeat_hands_the_job_back(make_world: Callable[..., World]) -> None:
    # Given a model call that outlasts a heartbeat, and a table that refuses the heartbeat
    gate = threading.Event()
    world = make_world(repository=FlakyHeartbeats(), provider=CountingProvider(gate=gate))
    job = world.job()

    # When the job runs
    world.deliver(job)

    # Then it is Pending again with backoff, not Running until the sweeper
    handed_back(world, job)
    gate.set()


class FlakyInputs(InMemoryPayloadStore):
    def get_input(self, job_id: str, location: BlobLocation) -> JobInput | None:
        raise StorageUnavailableError("throttled")


def test_a_storage_error_reading_the_input_hands_the_job_back(make_world: Callable[..., World]) -> None:
    world = make_world(payloads=FlakyInputs())
    job = world.job()

    world.deliver(job)

    handed_back(world, job)
    assert world.provider.calls == []


class ResultWritesFail(InMemoryPayloadStore):
    """put_result fails `failures` times, then works."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def put_result(self, result: JobResult, location: BlobLocation, expires_at: datetime) -> JobResult:
        if self.failures > 0:
            self.failures -= 1
            raise StorageUnavailableError("throttled")
        return super().put_result(result, location, expires_at)


# An answer too long to ride in the job item's terminal write: it is stored as an item first.
LONG_ANSWER = "The summary, at the length of a long answer. " * 12


def test_an_answer_whose_result_write_failed_is_kept_and_adopted_by_the_next_claim(
    make_world: Callable[..., World],
) -> None:
    # Given a result write that fails once, then works (the worker's second try stores the answer)
    world = make_world(payloads=ResultWritesFail(failures=1), provider=CountingProvider(LONG_ANSWER))
    job = world.job()

    # When the job runs: the answer comes, its write fails, the job is handed back
    world.deliver(job)
    pending = handed_back(world, job)
    world.clock.set(pending.dispatch_at)

    # And its message comes back
    world.deliver(job)

    # Then the second claim adopted the stored answer: one model call, its usage, its output
    done = world.current(job)
    assert (done.status, done.attempts, done.usage) == (JobStatus.SUCCEEDED, 2, USAGE)
    assert len(world.provider.calls) == 1
    stored = world.payloads.get_result(job.job_id, "item")
    assert stored == JobResult(job_id=job.job_id, output=LONG_ANSWER, usage=USAGE)


def test_an_answer_that_cannot_be_stored_at_all_is_asked_for_again(make_world: Callable[..., World]) -> None:
    world = make_world(payloads=ResultWritesFail(failures=2), provider=CountingProvider(LONG_ANSWER))
    job = world.job()
    world.deliver(job)
    world.clock.set(handed_back(world, job).dispatch_at)

    world.deliver(job)

    assert world.current(job).status is JobStatus.SUCCEEDED
    assert len(world.provider.calls) == 2


class TerminalWritesFail(InMemoryJobRepository):
    """The status write of a Succeeded job fails (storage throttled) `failures` times."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def transition(self, transition: Transition) -> JobRecord:
        if transition.target is JobStatus.SUCCEEDED and self.failures:
            self.failures -= 1
            raise StorageUnavailableError("throttled")
        return super().transition(transition)


def test_a_short_answer_rides_in_the_terminal_write_with_no_write_of_its_own(world: World) -> None:
    job = world.job()

    world.deliver(job)

    done = world.current(job)
    assert (done.status, done.result_location) == (JobStatus.SUCCEEDED, "job")
    assert done.inline_result() == JobResult(job_id=job.job_id, output="The summary.", usage=USAGE)
    assert world.payloads.find_result(job.job_id) is None


def test_a_short_answer_whose_terminal_write_failed_is_kept_and_adopted_by_the_next_claim(
    make_world: Callable[..., World],
) -> None:
    # Given a status write that fails once: the answer that was to ride in it is kept as an item
    world = make_world(repository=TerminalWritesFail(failures=1))
    job = world.job()
    world.deliver(job)
    world.clock.set(handed_back(world, job).dispatch_at)

    # When its message comes back
    world.deliver(job)

    # Then the next claim adopts it: one model call, and the job succeeds with that answer
    done = world.current(job)
    assert (done.status, done.result_location, done.usage) == (JobStatus.SUCCEEDED, "item", USAGE)
    assert len(world.provider.calls) == 1
    assert world.payloads.get_result(job.job_id, "item") == JobResult(
        job_id=job.job_id, output="The summary.", usage=USAGE
    )


def test_a_job_with_its_input_inline_reads_none_and_leaves_none_behind(world: World) -> None:
    job = job_record(world.clock.now(), input_location="job")
    text = JobInput(job_id=job.job_id, text="A short text in the job item.")
    job = job.model_copy(update={"input_body": text.body()})
    world.repository.create_job(job, job.dispatch_at + timedelta(minutes=15))

    world.deliver(job)

    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert "A short text in the job item." in world.provider.calls[0].messages[-1]["content"]
    # The terminal write removed the inline input: nothing can run a Succeeded job again
    assert (done.input_location, done.inline_input()) == ("job", None)
    assert world.payloads.get_input(job.job_id, "item") is None


def test_a_failed_job_keeps_its_inline_input_as_an_item_for_a_redrive(
    make_world: Callable[..., World],
) -> None:
    class Refusing:
        def complete(self, request: CompletionRequest) -> Completion:
            raise TerminalProviderError("content_policy", "the provider declined")

    world = make_world(provider=Refusing())
    job = job_record(world.clock.now(), input_location="job")
    job = job.model_copy(update={"input_body": JobInput(job_id=job.job_id, text="Keep me.").body()})
    world.repository.create_job(job, job.dispatch_at + timedelta(minutes=15))

    world.deliver(job)

    done = world.current(job)
    assert (done.status, done.input_location) == (JobStatus.FAILED, "item")
    assert world.payloads.get_input(job.job_id, "item") == JobInput(job_id=job.job_id, text="Keep me.")
    expected_expiry = world.clock.now() + timedelta(hours=world.settings.input_retention_hours)
    assert world.payloads.expires_at[("input", job.job_id, "item")] == expected_expiry


class BrokenSecret:
    def complete(self, request: CompletionRequest) -> Completion:
        raise RuntimeError("GetSecretValue: AccessDeniedException")


def test_a_secret_that_cannot_be_read_hands_the_job_back(make_world: Callable[..., World]) -> None:
    world = make_world(provider=BrokenSecret())
    job = world.job()

    world.deliver(job)

    handed_back(world, job)


def test_a_provider_that_cannot_be_built_hands_the_job_back(world: World) -> None:
    def unbuildable() -> Any:
        raise RuntimeError("no client for you")

    world.build_provider = unbuildable  # type: ignore[method-assign]
    job = world.job()

    world.deliver(job)

    handed_back(world, job)


def test_a_prompt_version_this_deploy_does_not_know_hands_the_job_back(world: World) -> None:
    # Given a job a newer deploy accepted, reaching this older worker mid-rollout
    job = world.job(prompt_version="summarize-v99")

    # When it runs
    world.deliver(job)

    # Then it is handed back for a worker that knows the prompt, with no model call
    handed_back(world, job)
    assert world.provider.calls == []


def test_errors_that_persist_end_in_retries_exhausted(world: World) -> None:
    job = world.job(prompt_version="summarize-v99", max_attempts=2)

    world.deliver(job)
    world.clock.set(world.current(job).dispatch_at)
    world.deliver(job)

    failed = world.current(job)
    assert (failed.status, failed.error and failed.error.code) == (JobStatus.FAILED, "retries_exhausted")


# --- results are adopted, never dropped -----------------------------------------------------------


def test_a_result_an_earlier_claim_stored_is_adopted_without_a_model_call(world: World) -> None:
    # Given a job whose earlier claim stored its answer and died before the terminal write
    job = world.job(attempts=1)
    earlier = JobResult(
        job_id=job.job_id, output="The earlier answer.", usage=Usage(input_tokens=5, output_tokens=3)
    )
    world.payloads.put_result(earlier, "item", job.expires_at)

    # When the job runs again
    world.deliver(job)

    # Then it succeeds with that output and that output's usage, and no model call
    done = world.current(job)
    assert (done.status, done.result_location, done.usage) == (JobStatus.SUCCEEDED, "item", earlier.usage)
    assert world.provider.calls == []


class UnreadableResults(InMemoryPayloadStore):
    """Reads of results fail, as S3 answers AccessDenied to a role that may not read them."""

    def get_result(self, job_id: str, location: BlobLocation) -> JobResult | None:
        raise StorageUnavailableError("AccessDenied")


def test_a_claim_that_cannot_look_for_an_earlier_result_hands_the_job_back_unpaid(
    make_world: Callable[..., World],
) -> None:
    # Given a job claimed before, whose earlier result (if any) cannot be read
    world = make_world(payloads=UnreadableResults())
    job = world.job(attempts=1)

    # When it runs again
    world.deliver(job)

    # Then it is handed back without a model call: "cannot read" is not "no result"
    handed_back(world, job)
    assert world.provider.calls == []


class LateEarlierWriter(InMemoryPayloadStore):
    """A worker that lost its lease stores its answer just before this one's write."""

    def __init__(self, earlier: JobResult) -> None:
        super().__init__()
        self.earlier = earlier

    def put_result(self, result: JobResult, location: BlobLocation, expires_at: datetime) -> JobResult:
        super().put_result(self.earlier, location, expires_at)
        return super().put_result(result, location, expires_at)


def test_a_result_written_first_by_a_lost_lease_worker_wins_with_its_own_usage(
    make_world: Callable[..., World],
) -> None:
    world = make_world(provider=CountingProvider(LONG_ANSWER))
    earlier_usage = Usage(input_tokens=5, output_tokens=3)
    job = world.job()
    earlier = JobResult(job_id=job.job_id, output="The other worker's answer.", usage=earlier_usage)
    world.payloads = LateEarlierWriter(earlier)
    world.payloads.put_input(JobInput(job_id=job.job_id, text="The text."), "item", job.expires_at)

    world.deliver(job)

    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert world.payloads.get_result(job.job_id, "item") == earlier
    # Both calls were made and paid for: the job counts them both.
    assert done.usage == Usage(input_tokens=45, output_tokens=10)


def test_the_fake_payload_store_is_write_once_like_the_adapter(payloads: InMemoryPayloadStore) -> None:
    first = JobResult(job_id="j", output="first", usage=USAGE)
    second = JobResult(job_id="j", output="second", usage=None)
    expires = datetime(2030, 1, 1, tzinfo=FakeClock().now().tzinfo)

    assert payloads.put_result(first, "item", expires) == first
    assert payloads.put_result(second, "item", expires) == first
    assert payloads.get_result("j", "item") == first
    assert payloads.find_result("j") == ("item", first)
    payloads.put_input(JobInput(job_id="j", text="one"), "item", expires)
    payloads.put_input(JobInput(job_id="j", text="two"), "item", expires + timedelta(days=1))
    assert payloads.get_input("j", "item") == JobInput(job_id="j", text="one")
    assert payloads.expires_at[("input", "j", "item")] == expires


# --- cost: one request per claim, no index write -------------------------------------------------


class NoReads(InMemoryJobRepository):
    """The worker must claim without reading the job first (one UpdateItem, DESIGN.md "Cost"), and
    the claim must leave the sweeper index alone; records the index entry at each claim."""

    def __init__(self) -> None:
        super().__init__()
        self.sweep_at_claims: list[datetime] = []

    def get_job(self, job_id: str) -> JobRecord | None:
        raise AssertionError("the claim reads the job first")

    def transition(self, transition: Transition) -> JobRecord:
        written = super().transition(transition)
        if written.status is JobStatus.RUNNING:
            self.sweep_at_claims.append(self.sweep_at[written.job_id])
        return written


def test_the_claim_is_one_request_and_leaves_the_sweep_index_alone(make_world: Callable[..., World]) -> None:
    repository = NoReads()
    world = make_world(repository=repository)
    job = world.job()
    submitted_sweep_at = repository.sweep_at[job.job_id]

    world.deliver(job)

    assert repository.sweep_at_claims == [submitted_sweep_at]  # the claim moved no index entry
    assert repository.jobs[job.job_id].status is JobStatus.SUCCEEDED
    assert job.job_id not in repository.sweep_at  # the terminal write removed it


# --- usage is never lost or counted twice --------------------------------------------------------


def test_a_redriven_one_step_job_adopts_a_result_a_failed_write_counted_without_counting_it_again(
    make_world: Callable[..., World],
) -> None:
    # Given a job whose Succeeded write fails on its last attempt: the answer is kept as an item,
    # and the job ends Failed/retries_exhausted with that answer's usage (the tokens were spent)
    world = make_world(repository=TerminalWritesFail(failures=1))
    job = world.job(max_attempts=1)
    world.deliver(job)
    failed = world.current(job)
    assert (failed.status, failed.usage) == (JobStatus.FAILED, USAGE)
    assert world.payloads.find_result(job.job_id) is not None

    # When an operator redrives it and the next claim adopts the stored answer
    redrive(world, job)
    world.deliver(job)

    # Then it succeeds with that answer, one model call in all, and its tokens counted once
    done = world.current(job)
    assert (done.status, done.usage) == (JobStatus.SUCCEEDED, USAGE)
    assert len(world.provider.calls) == 1


PLAN = PlanParameters(chunk_tokens=1000, step_output_tokens=100)
FILTERED_USAGE = Usage(input_tokens=300, output_tokens=50)


class FiltersPartThree:
    """Answers every step, except that part 3's output is filtered (billed) while `filtering`."""

    def __init__(self) -> None:
        self.filtering = True
        self.calls: list[CompletionRequest] = []

    def complete(self, request: CompletionRequest) -> Completion:
        self.calls.append(request)
        if self.filtering and "Part 3:" in request.messages[-1]["content"]:
            raise TerminalProviderError("content_policy", "filtered", usage=FILTERED_USAGE)
        return Completion(text="a part", usage=USAGE)


def test_a_redriven_multi_step_job_keeps_the_usage_of_its_refused_call(
    make_world: Callable[..., World],
) -> None:
    # Given a long job whose third part's answer is filtered after it was generated (and billed)
    # (one step at a time, each with time to finish before the invocation's deadline)
    provider = FiltersPartThree()
    world = make_world(provider=provider, STEP_CONCURRENCY="1", PROVIDER_TIMEOUT_SECONDS="10")
    text = "\n\n".join(f"Part {n}: " + "the ledger moved as planned. " * 140 for n in range(1, 7))
    plan = plan_job(text, Operation.SUMMARIZE, PLAN, prompt_version=template_for(Operation.SUMMARIZE).version)
    job = job_record(world.clock.now(), plan=PLAN, total_steps=plan.total_steps)
    world.repository.create_job(job, job.dispatch_at + timedelta(minutes=15))
    world.payloads.put_input(JobInput(job_id=job.job_id, text=text), "item", job.expires_at)
    world.deliver(job)
    failed = world.current(job)
    assert failed.error is not None
    assert failed.error.code == "content_policy"
    two_steps = Usage(input_tokens=2 * USAGE.input_tokens, output_tokens=2 * USAGE.output_tokens)
    assert failed.usage == _total(two_steps, FILTERED_USAGE)

    # When an operator redrives it (forced) and the provider answers part 3 this time
    provider.filtering = False
    redrive(world, job)
    world.deliver(job)

    # Then it succeeds, and its usage is every step's plus the refused call's: nothing dropped
    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    all_steps = Usage(
        input_tokens=plan.total_steps * USAGE.input_tokens,
        output_tokens=plan.total_steps * USAGE.output_tokens,
    )
    assert done.usage == _total(all_steps, FILTERED_USAGE)
    assert len(provider.calls) == plan.total_steps + 1


def _total(first: Usage, second: Usage) -> Usage:
    return Usage(
        input_tokens=first.input_tokens + second.input_tokens,
        output_tokens=first.output_tokens + second.output_tokens,
    )
