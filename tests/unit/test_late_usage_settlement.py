"""Late usage and the run's own settlement count a canceled batch job's tokens once, in either order
(DESIGN.md, "Token budgets: reserve, then settle" and "Cost tiers"): the poller's late count
(`settle_late`, once per (job, batch)) and the run's settlement (the notifier's, the sweeper's
repair, an operator redrive's) each count their own share, whichever reads the job first; a redrive
after a late count takes its base from the runs' usage alone.

The job here is a one-step batch job of a tenant with a limit whose run had already been billed
for a call before it went to a batch (RUN_USAGE), canceled while its batch ran; the batch's answer
to it then arrives late, billed LATE tokens (the fake Batch API's line: 10 in, 3 out).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from functions.batch_poller.service import poll
from functions.notifier.settlement import settle_record
from functions.sweeper.service import sweep
from outlast.operator.budgets import OperatorBudgets
from shared import resources as r
from shared.adapters.dynamo_items import job_to_item
from shared.budgets import (
    run_usage_tokens,
    settle_job,
    settlement_for,
)
from shared.job import JobRecord, Usage, add_usage
from shared.lifecycle import JobStatus
from shared.tiers import Tier
from tests.fakes import job_record
from tests.support.worker_world import World
from tests.unit.test_batch_tier import Batch, cancel_at_next_poll
from tests.unit.test_sweeper_budgets import budget_sweeper, reserve_first_run

RUN_USAGE = Usage(input_tokens=100, output_tokens=20)
RUN = 120
LATE = 13
RESERVED = 5_000
GRACE = timedelta(seconds=900)


@pytest.fixture
def world() -> Iterator[World]:
    made = World()
    yield made
    made.close()


@pytest.fixture
def batch(world: World) -> Batch:
    return Batch(world)


def reserved_batch_job(world: World, batch: Batch) -> JobRecord:
    """A batch job whose first run reserved RESERVED tokens, already billed RUN tokens."""
    now = world.clock.now()
    held = reserve_first_run(batch.ledger, job_record(now, usage=RUN_USAGE), now, RESERVED)
    return world.job(job_id=held.job_id, tier=Tier.BATCH, budget=held.budget, usage=RUN_USAGE)


def terminal_record(job: JobRecord) -> dict[str, Any]:
    """The stream record of the job's terminal write, as the notifier receives it."""
    image = job_to_item(job, sweep_at=None)
    image[r.WRITE_KIND_ATTRIBUTE] = {"S": "terminal"}
    return {"eventName": "MODIFY", "dynamodb": {"NewImage": image, "SequenceNumber": "1".zfill(21)}}


def canceled_then_late(world: World, batch: Batch, job: JobRecord) -> JobRecord:
    """Canceled in its batch; the batch then ends, and the poller counts the late answer."""
    cancel_at_next_poll(world, batch, job)
    canceled = world.current(job)
    poll(batch.poller)
    late = world.current(job)
    assert late.late_tokens == LATE
    assert late.usage is not None
    assert (late.usage.input_tokens, late.usage.output_tokens) == (110, 23)  # the run's and the late
    return canceled


def used_and_reserved(batch: Batch, job: JobRecord) -> tuple[int, int]:
    assert job.budget is not None
    counter = batch.ledger.counter(job.tenant, job.budget.period)
    return counter.used, counter.reserved


def test_the_notifier_first_then_the_late_count(world: World, batch: Batch) -> None:
    # Given a job canceled in its batch, its terminal write settled by the notifier at once
    job = reserved_batch_job(world, batch)
    cancel_at_next_poll(world, batch, job)
    settle_record(batch.ledger, terminal_record(world.current(job)))
    assert used_and_reserved(batch, job) == (RUN, 0)

    # When the batch ends and the poller counts the late answer
    poll(batch.poller)

    # Then the budget has the run's tokens and the late ones, once each
    assert used_and_reserved(batch, job) == (RUN + LATE, 0)
    assert list(batch.ledger.late.values()) == [LATE]


@pytest.mark.parametrize("image", ["terminal write", "job as read after the late count"])
def test_the_late_count_first_then_the_runs_settlement(world: World, batch: Batch, image: str) -> None:
    # Given a job canceled in its batch whose late answer was counted before its run was settled
    job = reserved_batch_job(world, batch)
    canceled = canceled_then_late(world, batch, job)
    assert used_and_reserved(batch, job) == (LATE, RESERVED)

    # When the run is settled, from its terminal write's record or from the job as it is now
    seen = canceled if image == "terminal write" else world.current(job)
    settled = settle_job(batch.ledger, seen)

    # Then the run counts its own tokens only: the late ones are in once
    assert settled
    assert used_and_reserved(batch, job) == (RUN + LATE, 0)


def test_the_sweeper_settles_a_run_after_its_late_count(world: World, batch: Batch) -> None:
    # Given a job canceled in its batch whose terminal record never settled, its late answer counted
    job = reserved_batch_job(world, batch)
    canceled_then_late(world, batch, job)

    # When the sweeper repairs its reservation
    world.clock.advance(GRACE + timedelta(hours=1))
    report = sweep(budget_sweeper(world.repository, world.clock, batch.ledger))

    # Then the run counts its own tokens only
    assert report.budget_repairs == 1
    assert used_and_reserved(batch, job) == (RUN + LATE, 0)


def test_a_redrive_after_the_late_count_takes_its_base_without_the_late_tokens(
    world: World, batch: Batch
) -> None:
    # Given a job canceled in its batch, its run unsettled, its late answer counted
    job = reserved_batch_job(world, batch)
    canceled = canceled_then_late(world, batch, job)
    late = world.current(job)
    batch.ledger.limits[job.tenant] = 1_000_000

    # When on-call redrives it (the redrive settles the ended run, then reserves the next)
    budgets = OperatorBudgets(batch.ledger, world.payloads, 0)  # type: ignore[arg-type]
    hold = budgets.reserve_redrive(late, world.clock.now(), GRACE)

    # Then the ended run counted its own tokens, and the next run counts from them: the base is
    # the same whether the redrive read the job before the late count or after it
    assert hold is not None
    assert (hold.run, hold.base_tokens) == (1, RUN)
    assert run_usage_tokens(canceled) == run_usage_tokens(late) == RUN
    assert used_and_reserved(batch, job)[0] == RUN + LATE

    # ... and when the redriven run ends having used 50 more, it settles those 50 alone: a one-step
    # job's usage adds up over runs; a multi-step job's is re-summed from its checkpoints and its
    # extra usage, which holds the late tokens
    more = Usage(input_tokens=40, output_tokens=10)
    one_step = late.model_copy(
        update={"status": JobStatus.SUCCEEDED, "budget": hold, "usage": add_usage(late.usage, more)}
    )
    assert late.extra_usage is not None
    resummed = add_usage(RUN_USAGE, more, late.extra_usage)  # its checkpoints' and its extra calls'
    multi_step = one_step.model_copy(update={"usage": resummed})
    for ended in (one_step, multi_step):
        settlement = settlement_for(ended)
        assert settlement is not None
        assert settlement.used_tokens == 50
