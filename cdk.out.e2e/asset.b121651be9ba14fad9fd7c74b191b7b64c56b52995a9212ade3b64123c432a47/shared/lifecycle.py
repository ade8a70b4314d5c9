"""The job lifecycle as data: the statuses, which transitions are allowed, which are terminal."""

from __future__ import annotations

from enum import StrEnum

from shared.errors import IllegalTransitionError


class JobStatus(StrEnum):
    """The closed set of statuses a job can be in."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLATION_REQUESTED = "CancellationRequested"
    CANCELED = "Canceled"


TERMINAL: frozenset[JobStatus] = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELED})

# Every edge of the state machine. Running -> Pending is a transient failure, a release near
# the Lambda timeout or an expired lease; Running/CancellationRequested -> Failed includes
# running out of attempts.
ALLOWED: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.PENDING: frozenset({JobStatus.RUNNING, JobStatus.CANCELED, JobStatus.FAILED}),
    JobStatus.RUNNING: frozenset(
        {
            JobStatus.SUCCEEDED,
            JobStatus.FAILED,
            JobStatus.PENDING,
            JobStatus.CANCELLATION_REQUESTED,
        }
    ),
    JobStatus.CANCELLATION_REQUESTED: frozenset({JobStatus.CANCELED, JobStatus.FAILED}),
    JobStatus.SUCCEEDED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELED: frozenset(),
}

# The one way out of a terminal state: an operator's DLQ redrive (modelled on Step Functions'
# RedriveExecution). It is not in ALLOWED so that no code path can take it by accident.
OPERATOR_REDRIVE: tuple[JobStatus, JobStatus] = (JobStatus.FAILED, JobStatus.PENDING)

# While a job is in one of these, the sweeper watches it through the sparse index.
WATCHED: frozenset[JobStatus] = frozenset(
    {JobStatus.PENDING, JobStatus.RUNNING, JobStatus.CANCELLATION_REQUESTED}
)


def is_terminal(status: JobStatus) -> bool:
    """True when the status never changes again (outside an operator redrive)."""
    return status in TERMINAL


def check_transition(source: JobStatus, target: JobStatus, *, operator_redrive: bool = False) -> None:
    """Raise IllegalTransitionError unless the lifecycle allows source -> target."""
    if operator_redrive and (source, target) == OPERATOR_REDRIVE:
        return
    if target not in ALLOWED[source]:
        raise IllegalTransitionError(source.value, target.value)
