"""One contract for the budget ledger: the in-memory fake and the DynamoDB adapter (on moto) agree,
so the unit tests of submit, settlement and repair with the fake say what they do on DynamoDB."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from shared.adapters.dynamodb_budgets import DynamoBudgetLedger, counter_key
from shared.budget_ports import BudgetLedger
from shared.budgets import (
    RESERVATION_SHARDS,
    BudgetState,
    LateUsage,
    Reservation,
    ReservationRef,
    ReserveOutcome,
    Settlement,
    new_reservation,
    reservation_shard,
)
from shared.ids import new_job_id
from tests.budget_fakes import InMemoryBudgetLedger
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

NOW = datetime(2030, 1, 15, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=15)
PERIOD = "2030-01"


@pytest.fixture(params=["fake", "dynamodb"])
def ledger(request: pytest.FixtureRequest) -> BudgetLedger:
    if request.param == "fake":
        return InMemoryBudgetLedger()
    resources: TestResources = request.getfixturevalue("resources")
    return DynamoBudgetLedger(Storage(resources).dynamodb, resources.budgets_table)


def _reservation(
    tokens: int, *, tenant: str = "acme", run: int = 0, job_id: str | None = None
) -> Reservation:
    return new_reservation(
        tenant,
        ReservationRef(job_id or new_job_id(), run),
        tokens,
        now=NOW,
        period=PERIOD,
        held_until=NOW + timedelta(hours=24),
        grace=GRACE,
        base_tokens=7 if run else 0,
    )


def _settlement(reservation: Reservation, used: int) -> Settlement:
    return Settlement(reservation.ref, reservation.tenant, reservation.period, reservation.tokens, used)


def test_reservations_fill_the_limit_exactly(ledger: BudgetLedger) -> None:
    first, second, third = _reservation(600), _reservation(400), _reservation(1)

    assert ledger.reserve(first, 1_000).outcome is ReserveOutcome.RESERVED
    assert ledger.reserve(second, 1_000).outcome is ReserveOutcome.RESERVED
    refused = ledger.reserve(third, 1_000)

    assert (refused.outcome, refused.committed) == (ReserveOutcome.EXCEEDED, 1_000)
    assert ledger.state("acme", PERIOD) == BudgetState("acme", PERIOD, None, used=0, reserved=1_000)
    assert ledger.open_reservations([first.ref, second.ref, third.ref]) == {first.ref, second.ref}


def test_a_reservation_is_made_once(ledger: BudgetLedger) -> None:
    reservation = _reservation(300)

    outcomes = [ledger.reserve(reservation, 1_000).outcome for _ in range(3)]

    assert outcomes == [ReserveOutcome.RESERVED] + [ReserveOutcome.ALREADY_RESERVED] * 2
    assert ledger.state("acme", PERIOD).reserved == 300


def test_a_repeated_reservation_comes_back_as_it_was_stored(ledger: BudgetLedger) -> None:
    # Given a run's reservation, made by one deploy's code
    stored = _reservation(300, run=1)
    ledger.reserve(stored, 1_000)

    # When a retry made by newer code proposes another bound, period and base for the same run
    proposed = replace(stored, tokens=450, period="2030-02", base_tokens=0)
    result = ledger.reserve(proposed, 1_000)

    # Then the answer carries the stored reservation, and the run holds what was reserved
    assert (result.outcome, result.stored) == (ReserveOutcome.ALREADY_RESERVED, stored)
    assert result.hold(proposed) == stored.hold
    assert ledger.state("acme", PERIOD).reserved == 300


def test_an_existing_reservation_wins_over_a_full_budget(ledger: BudgetLedger) -> None:
    # A retry of a submit that reserved, after others filled the budget: it is still reserved
    reservation = _reservation(600)
    ledger.reserve(reservation, 1_000)
    ledger.reserve(_reservation(400), 1_000)

    assert ledger.reserve(reservation, 1_000).outcome is ReserveOutcome.ALREADY_RESERVED


def test_a_job_larger_than_the_whole_limit_is_refused_without_a_write(ledger: BudgetLedger) -> None:
    assert ledger.reserve(_reservation(1_001), 1_000).outcome is ReserveOutcome.EXCEEDED
    assert ledger.state("acme", PERIOD) == BudgetState("acme", PERIOD, None)


def test_settlement_moves_the_reservation_to_used_once(ledger: BudgetLedger) -> None:
    reservation = _reservation(500)
    ledger.reserve(reservation, 1_000)

    assert ledger.settle(_settlement(reservation, 120)) is True
    assert ledger.settle(_settlement(reservation, 120)) is False

    assert ledger.state("acme", PERIOD) == BudgetState("acme", PERIOD, None, used=120, reserved=0)
    assert ledger.open_reservations([reservation.ref]) == set()
    # ... and what it did not use can be reserved again
    assert ledger.reserve(_reservation(880), 1_000).outcome is ReserveOutcome.RESERVED


def test_a_release_gives_every_token_back_once(ledger: BudgetLedger) -> None:
    reservation = _reservation(500)
    ledger.reserve(reservation, 1_000)

    assert ledger.release(reservation) is True
    assert ledger.release(reservation) is False
    assert ledger.settle(_settlement(reservation, 1)) is False

    assert ledger.state("acme", PERIOD) == BudgetState("acme", PERIOD, None, used=0, reserved=0)


def test_a_closed_run_keeps_what_it_was_charged_and_an_open_one_says_nothing(ledger: BudgetLedger) -> None:
    # Given one job's three runs: settled, released, and one still open
    job_id = new_job_id()
    settled, released, running = (_reservation(100, job_id=job_id, run=run) for run in range(3))
    for reservation in (settled, released, running):
        ledger.reserve(reservation, 1_000)
    ledger.settle(_settlement(settled, 42))
    ledger.release(released)
    ledger.defer(running, NOW + GRACE)

    # Then the ledger says what each closed run counted, per run, and nothing for the open one
    assert ledger.settled_runs(job_id) == {0: 42, 1: 0}
    assert ledger.settled_runs(new_job_id()) == {}
    assert ledger.open_reservations([settled.ref, released.ref, running.ref]) == {running.ref}
    # ... and a closed run is never reserved again (a repeated submit or redrive finds it)
    assert ledger.reserve(settled, 1_000).outcome is ReserveOutcome.ALREADY_RESERVED
    assert ledger.state("acme", PERIOD) == BudgetState("acme", PERIOD, None, used=42, reserved=100)


def test_a_settlement_for_other_tokens_than_reserved_changes_nothing(ledger: BudgetLedger) -> None:
    reservation = _reservation(500)
    ledger.reserve(reservation, 1_000)

    wrong = Settlement(reservation.ref, "acme", PERIOD, reserved_tokens=499, used_tokens=10)

    assert ledger.settle(wrong) is False
    assert ledger.state("acme", PERIOD).reserved == 500


def test_usage_over_the_reservation_is_counted_in_full(ledger: BudgetLedger) -> None:
    reservation = _reservation(500)
    ledger.reserve(reservation, 1_000)

    ledger.settle(_settlement(reservation, 700))

    assert ledger.state("acme", PERIOD).used == 700
    assert ledger.reserve(_reservation(301), 1_000).outcome is ReserveOutcome.EXCEEDED
    assert ledger.reserve(_reservation(300), 1_000).outcome is ReserveOutcome.RESERVED


def test_tenants_and_periods_are_apart(ledger: BudgetLedger) -> None:
    ledger.reserve(_reservation(900, tenant="acme"), 1_000)

    assert ledger.reserve(_reservation(900, tenant="globex"), 1_000).outcome is ReserveOutcome.RESERVED
    assert ledger.state("acme", "2030-02") == BudgetState("acme", "2030-02", None)


def test_due_reservations_come_by_shard_until_deferred_or_closed(ledger: BudgetLedger) -> None:
    # Given reservations in every shard, due a grace after they were made
    reservations = [_reservation(10) for _ in range(12)]
    for reservation in reservations:
        ledger.reserve(reservation, 1_000_000)
    shards = {reservation_shard(res.ref.job_id) for res in reservations}
    assert len(shards) > 1

    # Then none is due before the grace, all of them after it
    assert all(ledger.due(str(shard), NOW, 100) == [] for shard in range(RESERVATION_SHARDS))
    due = [res for shard in range(RESERVATION_SHARDS) for res in ledger.due(str(shard), NOW + GRACE, 100)]
    assert sorted(res.ref.job_id for res in due) == sorted(res.ref.job_id for res in reservations)
    assert set(due) == set(reservations)

    # When one is deferred and one settled, they are not due any more
    deferred, settled = reservations[0], reservations[1]
    ledger.defer(deferred, NOW + 2 * GRACE)
    ledger.settle(_settlement(settled, 3))
    still_due = [
        res.ref for shard in range(RESERVATION_SHARDS) for res in ledger.due(str(shard), NOW + GRACE, 100)
    ]
    assert deferred.ref not in still_due
    assert settled.ref not in still_due
    assert len(still_due) == 10
    later = ledger.due(reservation_shard(deferred.ref.job_id), NOW + 2 * GRACE, 100)
    assert deferred.ref in [res.ref for res in later]


def test_defer_of_a_closed_reservation_does_nothing(ledger: BudgetLedger) -> None:
    reservation = _reservation(10)
    ledger.reserve(reservation, 1_000)
    ledger.release(reservation)

    ledger.defer(reservation, NOW + GRACE)

    assert ledger.open_reservations([reservation.ref]) == set()


def test_a_redrive_run_is_a_reservation_of_its_own(ledger: BudgetLedger) -> None:
    job_id = new_job_id()
    first, second = _reservation(100, job_id=job_id), _reservation(100, job_id=job_id, run=1)

    assert ledger.reserve(first, 1_000).outcome is ReserveOutcome.RESERVED
    assert ledger.reserve(second, 1_000).outcome is ReserveOutcome.RESERVED
    ledger.settle(_settlement(first, 40))

    assert ledger.open_reservations([first.ref, second.ref]) == {second.ref}
    [due] = ledger.due(reservation_shard(job_id), NOW + GRACE, 10)
    assert due == second


def test_the_dynamodb_counter_keeps_used_plus_reserved_for_the_condition(resources: TestResources) -> None:
    storage = Storage(resources)
    ledger = DynamoBudgetLedger(storage.dynamodb, resources.budgets_table)
    reservation = _reservation(500)
    ledger.reserve(reservation, 1_000)
    ledger.settle(_settlement(reservation, 120))
    ledger.reserve(_reservation(300), 1_000)

    item = storage.dynamodb.get_item(
        TableName=resources.budgets_table, Key=counter_key("acme", PERIOD), ConsistentRead=True
    )["Item"]

    assert (item["usedTokens"]["N"], item["reservedTokens"]["N"], item["committedTokens"]["N"]) == (
        "120",
        "300",
        "420",
    )


def test_an_operator_limit_is_read_with_the_counter(resources: TestResources) -> None:
    ledger = DynamoBudgetLedger(Storage(resources).dynamodb, resources.budgets_table)
    ledger.set_limit("acme", 5_000, NOW)
    ledger.set_limit("globex", 0, NOW)
    ledger.reserve(_reservation(10, tenant="initech"), 100)

    assert ledger.state("acme", PERIOD).configured_limit == 5_000
    assert ledger.state("globex", PERIOD).configured_limit == 0
    assert ledger.state("initech", PERIOD) == BudgetState("initech", PERIOD, None, used=0, reserved=10)
    assert sorted(ledger.tenants()) == ["acme", "globex", "initech"]


def test_late_usage_comes_into_used_once_per_job_and_batch(ledger: BudgetLedger) -> None:
    reservation = _reservation(500)
    ledger.reserve(reservation, 1_000)
    ledger.settle(_settlement(reservation, 120))
    job_id = reservation.ref.job_id

    first = ledger.settle_late(LateUsage(job_id, "batch_1", "acme", PERIOD, 13))
    again = ledger.settle_late(LateUsage(job_id, "batch_1", "acme", PERIOD, 13))
    other = ledger.settle_late(LateUsage(job_id, "batch_2", "acme", PERIOD, 7))

    assert (first, again, other) == (True, False, True)
    state = ledger.state("acme", PERIOD)
    assert (state.used, state.reserved, state.committed) == (140, 0, 140)
    assert ledger.settled_runs(job_id) == {0: 120}  # a late count is no run's settlement


def test_the_dynamodb_ledger_reads_back_a_jobs_late_usage_by_batch(resources: TestResources) -> None:
    ledger = DynamoBudgetLedger(Storage(resources).dynamodb, resources.budgets_table)
    job_id = new_job_id()
    ledger.settle_late(LateUsage(job_id, "batch_1", "acme", PERIOD, 13))
    ledger.settle_late(LateUsage(job_id, "batch_2", "acme", PERIOD, 7))

    assert ledger.late_counted(job_id) == {"batch_1": 13, "batch_2": 7}
    assert ledger.late_counted(new_job_id()) == {}
