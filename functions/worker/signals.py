"""How a run of a job stops early: signals between the worker's parts, not errors for anyone else."""

from __future__ import annotations


class RetryLater(Exception):  # noqa: N818 - a signal to the batch processor, not an error
    """Keep the message: the job went back to Pending but no fresh message could be sent for it, so
    this one comes back after its visibility timeout and dispatches it."""


class LeaseLost(Exception):  # noqa: N818
    """A heartbeat (or a progress write) found someone else holding the job."""


class CancelObserved(Exception):  # noqa: N818
    """A heartbeat (or a progress write) found the job CancellationRequested."""


class ReleaseNeeded(Exception):  # noqa: N818
    """The invocation is about to time out; hand the job back rather than lose it."""


class OutputWriteFailed(Exception):  # noqa: N818
    """An event of the streaming call could not be written: the call was stopped (or its answer is
    not complete in events), so the job is handed back and the next claim streams a new attempt.
    `usage` is what the call cost (by estimate when it was stopped)."""

    def __init__(self, usage: object | None) -> None:
        super().__init__("An output event could not be written.")
        self.usage = usage
