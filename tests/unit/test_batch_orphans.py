"""A provider batch its batcher died before recording (DESIGN.md, "Cost tiers"): the batcher's
write-ahead intent lets the poller find it by its metadata once the intent is older than the
batcher's timeout plus a margin; it is cancelled, its answers are never kept (the redelivered calls
went into another batch, which the job waits on), and what it billed is counted as late usage once
the job has ended. An intent whose batcher died before creating anything just goes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from functions.batch_poller.service import poll
from shared.batches import BatchCall, OpenBatch
from shared.job import BudgetHold, JobRecord
from shared.lifecycle import JobStatus
from shared.ports import Lane
from shared.tiers import Tier
from tests.batch_fakes import InMemoryOpenBatchStore
from tests.support.worker_world import World
from tests.unit.test_batch_tier import INTENT_GRACE_SECONDS, Batch

PAST_GRACE = timedelta(seconds=INTENT_GRACE_SECONDS + 1)


class DiesOnce(InMemoryOpenBatchStore):
    """The batcher's invocation dies at one write of the store (once), as a killed process would."""

    def __init__(self, at: str) -> None:
        super().__init__()
        self.at = at

    def put(self, batch: OpenBatch) -> None:
        self._maybe_die("put")
        super().put(batch)

    def delete_intent(self, intent_id: str) -> None:
        self._maybe_die("delete_intent")
        super().delete_intent(intent_id)

    def _maybe_die(self, method: str) -> None:
        if self.at == method:
            self.at = ""
            raise RuntimeError("the batcher's invocation died")


@pytest.fixture
def world() -> Iterator[World]:
    made = World()
    yield made
    made.close()


def crash_after_create(world: World, batch: Batch, job: JobRecord) -> list[BatchCall]:
    """The job's call handed over, and a batcher that dies once its provider batch exists."""
    world.deliver(job)
    calls = list(world.batcher.calls)
    with pytest.raises(RuntimeError):
        batch.run_batcher()
    assert list(batch.api.batches) == ["batch-1"]  # at the provider, recorded nowhere
    assert batch.store.batches == {}
    return calls


def test_a_batch_its_batcher_died_before_recording_is_cancelled_and_counted_once_its_job_ends(
    world: World,
) -> None:
    batch = Batch(world, DiesOnce("put"))
    job = world.job(tier=Tier.BATCH, budget=BudgetHold(period="2026-12", tokens=500))
    calls = crash_after_create(world, batch, job)
    [intent] = batch.store.intents.values()
    assert batch.api.metadata["batch-1"]["outlast_intent"] == intent.intent_id

    poll(batch.poller)  # within the grace: its batcher may still be recording it
    assert batch.store.intents != {}
    assert batch.api.cancelled == []

    world.clock.advance(PAST_GRACE)
    report = poll(batch.poller)

    assert report.orphaned == 1
    assert batch.store.intents == {}
    orphan = batch.store.batches["batch-1"]
    assert orphan.orphaned
    assert batch.api.cancelled == ["batch-1"]
    # Open until its job ends, which is no provider's delay: never counted as overdue.
    assert not orphan.overdue(world.clock.now() + timedelta(days=2))

    # SQS delivers the calls again: a second batch, which the job waits on.
    world.batcher.calls = calls
    assert batch.run_batcher() == ["batch-2"]
    [call] = calls
    batch.api.finish("batch-1", "cancelled", {call.custom_id: "Answered before the cancel took."})
    poll(batch.poller)
    assert world.current(job).status is JobStatus.RUNNING  # the orphan's answer is never kept
    assert "batch-1" in batch.store.batches  # its job has not ended: its late usage must wait

    batch.api.finish("batch-2", "completed", {call.custom_id: "The second batch's answer."})
    poll(batch.poller)
    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED  # ended by the second batch's answer
    result = done.inline_result()
    assert result is not None
    assert result.output == "The second batch's answer."
    poll(batch.poller)
    poll(batch.poller)  # a second look changes nothing

    assert batch.store.batches == {}
    counted = world.current(job).usage
    assert counted is not None
    assert counted.input_tokens == 20  # its own batch's 10, and the orphan's 10 billed late
    assert batch.ledger.late == {(job.job_id, "batch-1"): 13}


def test_an_intent_whose_batcher_made_no_batch_is_deleted(world: World) -> None:
    batch = Batch(world)
    job = world.job(tier=Tier.BATCH)
    world.deliver(job)

    def refused(model: str, input_file: bytes, metadata: dict[str, str]) -> object:
        raise RuntimeError("the provider refused the create")

    batch.api.create = refused  # type: ignore[method-assign,assignment]
    with pytest.raises(RuntimeError):
        batch.run_batcher()
    assert len(batch.store.intents) == 1

    world.clock.advance(PAST_GRACE)
    report = poll(batch.poller)

    assert report.orphaned == 0
    assert batch.store.intents == {}
    assert batch.store.batches == {}
    assert batch.api.cancelled == []


def test_an_intent_left_after_its_batch_was_recorded_makes_no_orphan_and_no_second_batch(
    world: World,
) -> None:
    batch = Batch(world, DiesOnce("delete_intent"))  # the intent's delete fails (throttled, say)
    job = world.job(tier=Tier.BATCH)
    world.deliver(job)
    calls = list(world.batcher.calls)
    assert batch.run_batcher() == ["batch-1"]  # the invocation still succeeds: no redelivery
    assert world.current(job).batch_id == "batch-1"
    assert not batch.store.batches["batch-1"].orphaned
    world.batcher.calls = calls  # and were the calls delivered again, they would make no batch
    assert batch.run_batcher() == []

    world.clock.advance(PAST_GRACE)
    report = poll(batch.poller)

    assert report.orphaned == 0
    assert batch.store.intents == {}
    assert not batch.store.batches["batch-1"].orphaned  # the conditional write kept the batcher's
    assert batch.api.cancelled == []


def test_an_orphan_that_ended_before_it_was_found_is_not_cancelled(world: World) -> None:
    batch = Batch(world, DiesOnce("put"))
    job = world.job(tier=Tier.BATCH)
    calls = crash_after_create(world, batch, job)
    [call] = calls
    batch.api.finish("batch-1", "completed", {call.custom_id: "Nobody reads this."})
    world.clock.advance(PAST_GRACE)

    poll(batch.poller)

    assert batch.api.cancelled == []
    assert batch.store.batches["batch-1"].orphaned
    assert world.current(job).status is JobStatus.RUNNING  # never handed back from the orphan
    assert world.queues[Lane.SHARED].sent == []


def test_an_intent_the_provider_cannot_be_asked_about_is_kept_for_the_next_run(world: World) -> None:
    batch = Batch(world, DiesOnce("put"))
    job = world.job(tier=Tier.BATCH)
    crash_after_create(world, batch, job)
    world.clock.advance(PAST_GRACE)
    find = batch.api.find

    def unavailable(key: str, value: str, since: object) -> object:
        raise RuntimeError("the provider's list did not answer")

    batch.api.find = unavailable  # type: ignore[method-assign,assignment]
    assert poll(batch.poller).errors == 1
    assert len(batch.store.intents) == 1  # resolved by the next run
    batch.api.find = find  # type: ignore[method-assign]

    assert poll(batch.poller).orphaned == 1
    assert batch.store.intents == {}
