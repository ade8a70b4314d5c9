"""Local mode's SQS fair-queue emulation: the order AWS documents, over a fake clock."""

from __future__ import annotations

from outlast.local.fair_queue import NOISY_MIN_IN_FLIGHT, FairScheduler


def _scheduler() -> tuple[FairScheduler, list[float]]:
    now = [1000.0]
    return FairScheduler(lambda: now[0]), now


def group_of(item: tuple[str | None, int]) -> str | None:
    return item[0]


def test_with_no_history_messages_go_in_arrival_order() -> None:
    scheduler, _ = _scheduler()
    waiting = [("a", 1), ("a", 2), ("b", 1)]

    assert scheduler.take(waiting, group_of, 2) == [("a", 1), ("a", 2)]
    assert scheduler.in_flight() == {"a": 2}


def test_a_tenant_with_most_of_the_recent_processing_time_waits_behind_a_quiet_one() -> None:
    # Given tenant a took all the consumers' time in the last minute
    scheduler, now = _scheduler()
    scheduler.take([("a", 0)], group_of, 1)
    scheduler.finished(["a"], 5.0)
    now[0] += 1

    # When a's backlog and one message of b wait
    waiting = [("a", n) for n in range(1, 20)] + [("b", 1)]

    # Then b's message goes first, and a's fill the rest of the batch in order
    assert scheduler.take(waiting, group_of, 3) == [("b", 1), ("a", 1), ("a", 2)]


def test_a_tenant_with_many_in_flight_is_noisy_by_concurrency_share() -> None:
    scheduler, _ = _scheduler()
    scheduler.take([("a", n) for n in range(NOISY_MIN_IN_FLIGHT)], group_of, NOISY_MIN_IN_FLIGHT)

    assert scheduler.take([("a", 99), ("b", 1)], group_of, 1) == [("b", 1)]


def test_among_noisy_tenants_the_one_with_fewest_in_flight_goes_first() -> None:
    scheduler, now = _scheduler()
    scheduler.take([("a", 0), ("a", 1), ("b", 0)], group_of, 3)
    scheduler.finished(["a", "b"], 5.0)  # both noisy by time; a still has one in flight
    now[0] += 1

    taken = scheduler.take([("a", 2), ("a", 3), ("b", 1), ("b", 2)], group_of, 3)

    assert taken == [("b", 1), ("a", 2), ("b", 2)]


def test_a_message_without_a_group_is_a_quiet_tenant_of_its_own() -> None:
    scheduler, now = _scheduler()
    scheduler.take([("a", 0)], group_of, 1)
    scheduler.finished(["a"], 5.0)
    now[0] += 1

    assert scheduler.take([("a", 1), (None, 1)], group_of, 1) == [(None, 1)]


def test_noise_is_forgotten_after_the_recent_window() -> None:
    scheduler, now = _scheduler()
    scheduler.take([("a", 0)], group_of, 1)
    scheduler.finished(["a"], 5.0)
    now[0] += 61

    assert scheduler.take([("a", 1), ("b", 1)], group_of, 1) == [("a", 1)]


def test_noisy_messages_are_delivered_when_nothing_quiet_waits() -> None:
    scheduler, now = _scheduler()
    scheduler.take([("a", 0)], group_of, 1)
    scheduler.finished(["a"], 5.0)
    now[0] += 1

    assert scheduler.take([("a", 1), ("a", 2)], group_of, 10) == [("a", 1), ("a", 2)]
