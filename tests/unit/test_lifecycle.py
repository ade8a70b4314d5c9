"""The lifecycle as DESIGN.md draws it: every edge allowed, every other pair refused."""

from __future__ import annotations

from itertools import product

import pytest

from shared.errors import IllegalTransitionError
from shared.lifecycle import TERMINAL, WATCHED, JobStatus, check_transition, is_terminal

P, R, S, F, CR, C = (
    JobStatus.PENDING,
    JobStatus.RUNNING,
    JobStatus.SUCCEEDED,
    JobStatus.FAILED,
    JobStatus.CANCELLATION_REQUESTED,
    JobStatus.CANCELED,
)

# DESIGN.md "Lifecycle", written out here so that a change to the table in the code has to be
# made twice, on purpose. Pending -> Failed (the input is gone, or no attempts are left) and
# CancellationRequested -> Failed (out of attempts while a cancel waits) are the code's
# documented additions.
EDGES = {
    (P, R),
    (P, C),
    (P, F),
    (R, S),
    (R, F),
    (R, P),
    (R, CR),
    (CR, C),
    (CR, F),
}
NON_EDGES = sorted(set(product(JobStatus, JobStatus)) - EDGES)


def test_the_statuses_are_the_closed_set_of_the_contract() -> None:
    assert {status.value for status in JobStatus} == {
        "Pending",
        "Running",
        "Succeeded",
        "Failed",
        "CancellationRequested",
        "Canceled",
    }


@pytest.mark.parametrize(("source", "target"), sorted(EDGES))
def test_every_edge_of_the_lifecycle_is_allowed(source: JobStatus, target: JobStatus) -> None:
    check_transition(source, target)


@pytest.mark.parametrize(("source", "target"), NON_EDGES)
def test_every_other_pair_is_illegal(source: JobStatus, target: JobStatus) -> None:
    with pytest.raises(IllegalTransitionError) as caught:
        check_transition(source, target)

    assert (caught.value.source, caught.value.target) == (source.value, target.value)
    assert caught.value.code == "internal_error"


@pytest.mark.parametrize(("terminal", "target"), list(product(sorted(TERMINAL), JobStatus)))
def test_a_terminal_state_has_no_exit(terminal: JobStatus, target: JobStatus) -> None:
    with pytest.raises(IllegalTransitionError):
        check_transition(terminal, target)


def test_the_terminal_and_watched_sets() -> None:
    assert {S, F, C} == TERMINAL
    assert {P, R, CR} == WATCHED
    assert set(JobStatus) == WATCHED | TERMINAL
    assert {status for status in JobStatus if is_terminal(status)} == TERMINAL


class TestOperatorRedrive:
    def test_failed_to_pending_needs_the_operator_flag(self) -> None:
        with pytest.raises(IllegalTransitionError):
            check_transition(F, P)

        check_transition(F, P, operator_redrive=True)

    @pytest.mark.parametrize(("source", "target"), [pair for pair in NON_EDGES if pair != (F, P)], ids=str)
    def test_the_flag_opens_no_other_door(self, source: JobStatus, target: JobStatus) -> None:
        with pytest.raises(IllegalTransitionError):
            check_transition(source, target, operator_redrive=True)

    @pytest.mark.parametrize(("source", "target"), sorted(EDGES))
    def test_the_flag_closes_no_ordinary_edge(self, source: JobStatus, target: JobStatus) -> None:
        check_transition(source, target, operator_redrive=True)
