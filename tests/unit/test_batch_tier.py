"""The batch tier through its use cases on fakes (DESIGN.md, "Cost tiers"): the worker hands a batch
job's calls to the batcher and ends its claim with the job waiting; the batcher makes one batch per
model of the calls still waiting; the poller ends a one-step job with its answer through the usual
terminal write (a longer job's answers are written once as checkpoints and the job handed back); an
expired batch falls back to flex, a cancel ends the job at the next poll, and late answers are
discarded, their usage counted once per (job, batch) onto the job and its tenant's budget."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from pydantic import ValidationError

from functions.batch_poller.dependencies import BatchPollerDependencies
from functions.batch_poller.service import poll
from functions.batch_poller.settings import BatchPollerSettings
from functions.batcher.dependencies import BatcherDependencies
from functions.batcher.service import batch_calls
from shared import resources as r
from shared.adapters.json_schema import JsonSchemaValidator
from shared.batches import COMPLETION_WINDOW_SECONDS
from shared.contract import Operation, SubmitRequest
from shared.job import BudgetHold, JobInput, JobRecord, handed_back_marker
from shared.lifecycle import JobStatus
from shared.ports import Lane, Transition
from shared.tiers import Tier
from tests.batch_fakes import FakeBatchApi, InMemoryOpenBatchStore
from tests.budget_fakes import InMemoryBudgetLedger
from tests.fakes import InMemoryJobRepository, job_record
from tests.support.worker_world import World
from tests.unit.test_extract_worker import VALID, extract_job
from tests.unit.test_worker_flex import long_job

# The poller's grace for a batcher's intent (the batcher's timeout plus a margin, set by synth).
INTENT_GRACE_SECONDS = 70


@pytest.fixture
def world() -> Iterator[World]:
    made = World(FLEX_TIMEOUT_SECONDS="5")  # a flex call fits in the test's invocation
    yield made
    made.close()


class Batch:
    """The batcher and the poller over the world's fakes."""

    def __init__(self, world: World, store: InMemoryOpenBatchStore | None = None) -> None:
        self.world = world
        self.api = FakeBatchApi(world.clock)
        self.store = store or InMemoryOpenBatchStore()
        settings = BatchPollerSettings.model_validate(
            {
                r.ENV_JOBS_TABLE: "jobs",
                r.ENV_PAYLOAD_BUCKET: "payloads",
                r.ENV_JOBS_QUEUE_URL: "https://jobs",
                r.ENV_ISOLATION_QUEUE_URL: "https://isolation",
                r.ENV_BATCHES_TABLE: "batches",
                r.ENV_OPENAI_SECRET: "secret",
                r.ENV_BUDGETS_TABLE: "budgets",
                "BATCH_INTENT_GRACE_SECONDS": str(INTENT_GRACE_SECONDS),
            }
        )
        self.ledger = InMemoryBudgetLedger()
        self.batcher = BatcherDependencies(
            repository=world.repository, batches=self.store, api=lambda: self.api, clock=world.clock
        )
        self.poller = BatchPollerDependencies(
            settings=settings,
            repository=world.repository,
            payloads=world.payloads,
            steps=world.steps,
            queues=world.queues,
            batches=self.store,
            api=lambda: self.api,
            validator=JsonSchemaValidator(),
            budgets=self.ledger,
            clock=world.clock,
        )

    def run_batcher(self) -> list[str]:
        calls, self.world.batcher.calls = self.world.batcher.calls, []
        return batch_calls(self.batcher, calls).batches

    def redeliver(self, job: JobRecord) -> None:
        """The poller's message of the job, through the worker."""
        [(message, _)] = self.world.queues[Lane.SHARED].sent
        self.world.queues[Lane.SHARED].sent.clear()
        assert message.job_id == job.job_id
        self.world.deliver(job)


@pytest.fixture
def batch(world: World) -> Batch:
    return Batch(world)


def test_a_batch_job_waits_on_its_batch_then_succeeds_without_a_model_call(
    world: World, batch: Batch
) -> None:
    job = world.job(tier=Tier.BATCH)

    world.deliver(job)

    waiting = world.current(job)
    assert waiting.status is JobStatus.RUNNING
    assert waiting.status_document().waiting_for == "provider_batch"
    assert waiting.lease_expires_at is not None
    assert waiting.lease_expires_at > world.clock.now() + timedelta(seconds=COMPLETION_WINDOW_SECONDS)
    [call] = world.batcher.calls
    assert call.custom_id == f"{job.job_id}:{call.step_id}:1"
    assert "service_tier" not in call.body
    assert world.provider.calls == []

    [batch_id] = batch.run_batcher()
    assert world.current(job).batch_id == batch_id
    [line] = batch.api.input_lines(batch_id)
    assert line["custom_id"] == call.custom_id
    assert line["url"] == "/v1/chat/completions"

    poll(batch.poller)  # still running: nothing moves
    assert world.current(job).status is JobStatus.RUNNING

    batch.api.finish(batch_id, "completed", {call.custom_id: "The batch's summary."})
    report = poll(batch.poller)
    # The poller ends a one-step job itself (the usual terminal write under the hold): no hand-back,
    # no second claim, no second message.
    assert (report.finished, report.handed_back) == (1, 0)
    assert batch.store.batches == {}

    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert world.provider.calls == []  # the batch's answer was the job's only call
    assert done.usage is not None
    assert done.usage.tiers == frozenset({Tier.BATCH})
    assert done.waiting_for is None
    assert done.lease_token is None
    result = done.inline_result()
    assert result is not None
    assert result.output == "The batch's summary."  # in the terminal write itself
    assert handed_back_marker(batch_id) in done.batches_seen  # none of its usage is late


def test_an_expired_batch_sends_the_call_to_flex(world: World, batch: Batch) -> None:
    job = world.job(tier=Tier.BATCH)
    world.deliver(job)
    [batch_id] = batch.run_batcher()

    batch.api.finish(batch_id, "expired", {})
    report = poll(batch.poller)

    assert report.failed == 1
    assert world.current(job).batch_fallback
    batch.redeliver(job)
    assert world.current(job).status is JobStatus.SUCCEEDED
    [request] = world.provider.calls
    assert request.tier is Tier.FLEX  # within flexFallbackSeconds of its submit


def request_cancel(world: World, job: JobRecord) -> None:
    """The cancel API's write on a Running job: the poller is the one to observe it."""
    now = world.clock.now()
    world.repository.transition(
        Transition(
            job_id=job.job_id,
            source=JobStatus.RUNNING,
            target=JobStatus.CANCELLATION_REQUESTED,
            now=now,
            cancel_requested_at=now,
        )
    )


def test_a_cancel_ends_the_job_at_the_next_poll_and_its_late_answer_is_discarded(
    world: World, batch: Batch
) -> None:
    job = world.job(tier=Tier.BATCH)
    world.deliver(job)
    [batch_id] = batch.run_batcher()
    [call] = batch.store.batches[batch_id].calls
    request_cancel(world, job)

    poll(batch.poller)

    assert world.current(job).status is JobStatus.CANCELED
    assert batch.api.cancelled == [batch_id]  # nobody waits on it any more
    batch.api.finish(batch_id, "completed", {call.custom_id: "Too late."})
    poll(batch.poller)
    assert world.payloads.find_result(job.job_id) is None
    assert world.current(job).status is JobStatus.CANCELED
    assert world.queues[Lane.SHARED].sent == []


def cancel_at_next_poll(world: World, batch: Batch, job: JobRecord) -> tuple[str, str]:
    """A batch job whose cancel the poller honours while its batch runs; the batch then answers."""
    world.deliver(job)
    [batch_id] = batch.run_batcher()
    [call] = batch.store.batches[batch_id].calls
    request_cancel(world, job)
    poll(batch.poller)
    assert world.current(job).status is JobStatus.CANCELED
    batch.api.finish(batch_id, "cancelled", {call.custom_id: "Answered before the cancel took."})
    return batch_id, call.custom_id


def test_late_usage_comes_onto_the_job_and_its_budget_once_per_batch(world: World, batch: Batch) -> None:
    job = world.job(tier=Tier.BATCH, budget=BudgetHold(period="2026-12", tokens=500))
    batch_id, _ = cancel_at_next_poll(world, batch, job)
    kept = batch.store.batches[batch_id]

    poll(batch.poller)
    batch.store.put(kept)  # a crash before the delete: the next run sees the batch again
    poll(batch.poller)

    ended = world.current(job)
    assert ended.status is JobStatus.CANCELED
    assert ended.usage is not None
    assert (ended.usage.input_tokens, ended.usage.output_tokens) == (10, 3)  # the fake's billed line
    assert batch.ledger.counter(job.tenant, "2026-12").used == 13
    assert batch.ledger.late == {(job.job_id, batch_id): 13}
    assert world.repository.writes.count("count_late_usage") == 1
    assert batch.ledger.writes.count("settle_late") == 1


def test_late_usage_owed_to_the_budget_after_a_crash_is_counted_by_the_next_run(
    world: World, batch: Batch
) -> None:
    job = world.job(tier=Tier.BATCH, budget=BudgetHold(period="2026-12", tokens=500))
    batch_id, _ = cancel_at_next_poll(world, batch, job)
    settle = batch.ledger.settle_late

    def dies(late: object) -> bool:
        raise RuntimeError("the poller's invocation died")

    batch.ledger.settle_late = dies  # type: ignore[method-assign]
    assert poll(batch.poller).errors == 1  # the job's count is written, the budget's is not
    batch.ledger.settle_late = settle  # type: ignore[method-assign]
    poll(batch.poller)

    assert batch_id not in batch.store.batches
    ended = world.current(job)
    assert ended.usage is not None
    assert ended.usage.input_tokens == 10  # counted on the job once
    assert batch.ledger.counter(job.tenant, "2026-12").used == 13


def test_a_tenant_without_a_limit_gets_late_usage_on_the_job_and_no_budget_write(
    world: World, batch: Batch
) -> None:
    job = world.job(tier=Tier.BATCH)
    cancel_at_next_poll(world, batch, job)

    poll(batch.poller)

    ended = world.current(job)
    assert ended.usage is not None
    assert ended.usage.output_tokens == 3
    assert batch.ledger.writes == []


def test_an_answer_that_ended_its_job_is_never_late_usage_when_the_run_is_repeated(
    world: World, batch: Batch
) -> None:
    job = world.job(tier=Tier.BATCH, budget=BudgetHold(period="2026-12", tokens=500))
    world.deliver(job)
    [batch_id] = batch.run_batcher()
    [call] = batch.store.batches[batch_id].calls
    batch.api.finish(batch_id, "completed", {call.custom_id: "Kept."})
    kept = batch.store.batches[batch_id]
    poll(batch.poller)
    assert world.current(job).status is JobStatus.SUCCEEDED

    batch.store.put(kept)  # a crash before the delete: the next run sees the batch again
    poll(batch.poller)

    ended = world.current(job)
    assert ended.usage is not None
    assert ended.usage.input_tokens == 10  # the answer's, once: none of it is late usage
    assert ended.late_tokens == 0
    assert batch.ledger.writes == []


def test_a_redelivered_call_makes_no_second_batch(world: World, batch: Batch) -> None:
    job = world.job(tier=Tier.BATCH)
    world.deliver(job)
    calls = list(world.batcher.calls)
    batch.run_batcher()

    world.batcher.calls = calls  # SQS delivers the same message again
    assert batch.run_batcher() == []
    assert len(batch.api.batches) == 1


def test_a_poller_run_repeated_over_an_ended_batch_changes_nothing(world: World, batch: Batch) -> None:
    job = world.job(tier=Tier.BATCH)
    world.deliver(job)
    [batch_id] = batch.run_batcher()
    [call] = batch.store.batches[batch_id].calls
    batch.api.finish(batch_id, "completed", {call.custom_id: "Once."})
    kept = batch.store.batches[batch_id]

    poll(batch.poller)
    batch.store.put(kept)  # a crash before the delete: the next run sees the batch again
    poll(batch.poller)

    assert world.queues[Lane.SHARED].sent == []  # ended by the poller: no message at all
    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert done.usage is not None
    assert done.usage.input_tokens == 10


def test_a_stream_with_tier_batch_is_refused() -> None:
    with pytest.raises(ValidationError, match="stream"):
        SubmitRequest.model_validate(
            {"operation": "summarize", "input": {"text": "x"}, "options": {"tier": "batch", "stream": True}}
        )


def test_a_long_document_goes_batch_by_batch_and_ends_with_its_final_output(
    world: World, batch: Batch
) -> None:
    job = long_job(world, Tier.BATCH)
    rounds = 0
    seen_progress: list[int] = []
    while world.current(job).status is not JobStatus.SUCCEEDED:
        rounds += 1
        assert rounds <= job.total_steps, "the job must move on with every batch"
        world.deliver(job) if rounds == 1 else batch.redeliver(job)
        if world.current(job).status is JobStatus.SUCCEEDED:
            break
        waiting = world.current(job)
        assert waiting.waiting_for == "provider_batch"
        seen_progress.append(waiting.completed_steps)
        [batch_id] = batch.run_batcher()
        calls = batch.store.batches[batch_id].calls
        assert all(not call.final for call in calls)  # each answer is a step's checkpoint
        batch.api.finish(
            batch_id, "completed", {call.custom_id: f"Summary of {call.step_id}." for call in calls}
        )
        poll(batch.poller)

    done = world.current(job)
    assert rounds >= 2  # the map steps in one batch, the reduce after them in the next
    assert seen_progress[0] == 0
    assert seen_progress[1] > 0  # the first batch's checkpoints show as progress
    progress = done.status_document().progress
    assert progress.completed_steps == progress.total_steps
    assert world.provider.calls == []
    assert done.usage is not None
    assert done.usage.tiers == frozenset({Tier.BATCH})
    assert done.attempts == 1


class CrashOnTerminalWrite(InMemoryJobRepository):
    """A poller that dies right after reading the answers, before the job's terminal write."""

    def __init__(self) -> None:
        super().__init__()
        self.crash = True

    def transition(self, transition: Transition) -> JobRecord:
        if self.crash and transition.target is JobStatus.SUCCEEDED:
            self.crash = False
            raise RuntimeError("the poller's invocation died")
        return super().transition(transition)


def test_a_batch_the_poller_cannot_read_does_not_hold_up_the_others(world: World, batch: Batch) -> None:
    first, second = world.job(tier=Tier.BATCH), world.job(tier=Tier.BATCH)
    world.deliver(first)
    [broken] = batch.run_batcher()
    world.deliver(second)
    [healthy] = batch.run_batcher()
    [call] = batch.store.batches[healthy].calls
    batch.api.finish(healthy, "completed", {call.custom_id: "Fine."})
    del batch.api.batches[broken]  # the provider cannot find it (a KeyError in the fake)

    report = poll(batch.poller)

    assert (report.errors, report.finished) == (1, 1)
    assert world.current(second).status is JobStatus.SUCCEEDED
    assert broken in batch.store.batches  # tried again at the next run


def test_a_poller_that_dies_midway_loses_nothing_and_pays_nothing_twice() -> None:
    repository = CrashOnTerminalWrite()
    world = World(repository=repository)
    try:
        batch = Batch(world)
        job = world.job(tier=Tier.BATCH)
        world.deliver(job)
        [batch_id] = batch.run_batcher()
        [call] = batch.store.batches[batch_id].calls
        batch.api.finish(batch_id, "completed", {call.custom_id: "Kept once."})

        assert poll(batch.poller).errors == 1  # a crash midway: its batch stays open
        assert batch_id in batch.store.batches  # still open: the next run sees it through
        poll(batch.poller)

        done = world.current(job)
        assert done.status is JobStatus.SUCCEEDED
        assert world.provider.calls == []
        assert done.usage is not None
        assert done.usage.input_tokens == 10  # the batch's answer, counted once
    finally:
        world.close()


@pytest.mark.parametrize(
    ("answer", "kept"),
    [('{"vendor": "Acme", "total": 12.5}', True), ('{"vendor": "Acme"}', False), ("not json", False)],
)
def test_an_extract_answer_is_kept_only_when_it_matches_its_schema(
    world: World, batch: Batch, answer: str, kept: bool
) -> None:
    job = extract_job(world, tier=Tier.BATCH)
    world.provider.text = VALID  # the flex call a refused answer falls back to
    world.deliver(job)
    [call] = world.batcher.calls
    assert call.structured
    [batch_id] = batch.run_batcher()

    batch.api.finish(batch_id, "completed", {call.custom_id: answer})
    poll(batch.poller)
    if not kept:
        batch.redeliver(job)  # handed back to fall back; a kept answer ended the job at the poll

    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert done.batch_fallback is not kept
    assert len(world.provider.calls) == (0 if kept else 1)  # an answer off its schema is asked again


def classify_job(world: World, *, input_location: str = "item") -> JobRecord:
    """A batch classify job whose input (with its labels) is held at `input_location`."""
    job = job_record(
        world.clock.now(), tier=Tier.BATCH, operation=Operation.CLASSIFY, input_location=input_location
    )
    world.repository.create_job(job, job.dispatch_at + timedelta(minutes=15))
    labeled = JobInput(job_id=job.job_id, text="Great product.", labels=("Positive", "Negative"))
    world.payloads.put_input(labeled, input_location, job.expires_at)  # type: ignore[arg-type]
    return job


def test_a_classify_answer_ends_its_job_in_the_callers_spelling_of_the_label(
    world: World, batch: Batch
) -> None:
    job = classify_job(world)
    world.deliver(job)
    [batch_id] = batch.run_batcher()
    [call] = batch.store.batches[batch_id].calls
    batch.api.finish(batch_id, "completed", {call.custom_id: "positive."})

    assert poll(batch.poller).finished == 1

    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    result = done.inline_result()
    assert result is not None
    assert result.output == "Positive"  # as the worker's own terminal write would spell it


def test_a_classify_job_whose_input_is_in_s3_ends_in_the_callers_spelling_too(
    world: World, batch: Batch
) -> None:
    job = classify_job(world, input_location="s3")
    world.deliver(job)
    [batch_id] = batch.run_batcher()
    [call] = batch.store.batches[batch_id].calls
    batch.api.finish(batch_id, "completed", {call.custom_id: "negative."})

    report = poll(batch.poller)

    assert (report.finished, report.handed_back) == (1, 0)
    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    result = done.inline_result()
    assert result is not None
    assert result.output == "Negative"


class CancelBeforeTerminalWrite(InMemoryJobRepository):
    """A cancel request lands between the poller's read of the job and its Succeeded write."""

    def transition(self, transition: Transition) -> JobRecord:
        if transition.target is JobStatus.SUCCEEDED:
            current = self.jobs[transition.job_id]
            self.jobs[transition.job_id] = current.model_copy(
                update={"status": JobStatus.CANCELLATION_REQUESTED}
            )
        return super().transition(transition)


def test_a_cancel_that_races_the_answer_wins_and_the_answer_is_late_usage() -> None:
    world = World(repository=CancelBeforeTerminalWrite())
    try:
        batch = Batch(world)
        job = world.job(tier=Tier.BATCH, budget=BudgetHold(period="2026-12", tokens=500))
        world.deliver(job)
        [batch_id] = batch.run_batcher()
        [call] = batch.store.batches[batch_id].calls
        batch.api.finish(batch_id, "completed", {call.custom_id: "Too late."})

        report = poll(batch.poller)

        assert report.finished == 0
        ended = world.current(job)
        assert ended.status is JobStatus.CANCELED
        assert ended.inline_result() is None
        assert ended.late_tokens == 13  # the answer's 10 + 3, counted as late, once
        assert batch.ledger.late == {(job.job_id, batch_id): 13}
    finally:
        world.close()


def test_an_answer_not_kept_is_counted_on_the_job_all_the_same(world: World, batch: Batch) -> None:
    job = extract_job(world, tier=Tier.BATCH)
    world.provider.text = VALID  # the flex call the unfit answer falls back to
    world.deliver(job)
    [call] = world.batcher.calls
    [batch_id] = batch.run_batcher()
    batch.api.finish(batch_id, "completed", {call.custom_id: "not json"})  # billed, off its schema

    assert poll(batch.poller).handed_back == 1

    back = world.current(job)
    assert back.usage is not None
    assert (back.usage.input_tokens, back.usage.output_tokens) == (10, 3)  # what the batch billed
    assert back.usage.tiers == frozenset({Tier.BATCH})
    assert back.extra_usage is not None
    assert back.extra_usage.input_tokens == 10  # no checkpoint holds these tokens
    batch.redeliver(job)
    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert done.usage is not None
    assert done.usage.input_tokens > 10  # the batch's tokens and the fallback call's
    assert Tier.BATCH in done.usage.tiers
