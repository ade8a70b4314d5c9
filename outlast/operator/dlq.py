"""The DLQ for an operator run: read every message (held, hidden), join each with its job, and
carry out a redrive plan (outlast.operator.plan) one message at a time.

moto has no StartMessageMoveTask, and a move task could not check each job anyway, so the redrive
works message by message, the same way on the local stack and in AWS. Per message the order is:
conditional write on the job -> its input's retention renewed -> a new message on the queue of
the job's lane as written (outlast.operator.dispatch) -> delete the DLQ message. An interrupted
run leaves at worst a job already Pending whose DLQ message is still there; a rerun sees the job
Pending and only renews, sends and deletes (a duplicate message is harmless: the worker's claim
is conditional).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from outlast.operator.budgets import OperatorBudgets
from outlast.operator.dispatch import AWS_ERRORS, Result, describe, dispatch
from outlast.operator.plan import (
    DISPATCHING,
    DROPPING,
    Action,
    DeadLetter,
    Joined,
    PlanOptions,
    Step,
    plan,
)
from shared.job import JobRecord
from shared.ports import JobQueue, JobRepository, Lane, PayloadStore

SQS_BATCH = 10
DEFAULT_HOLD_SECONDS = 300
DEFAULT_MAX_MESSAGES = 1000


@dataclass(frozen=True)
class QueueDepth:
    """SQS's approximate counts for a queue."""

    visible: int
    in_flight: int
    delayed: int

    @property
    def total(self) -> int:
        """Every message the queue holds."""
        return self.visible + self.in_flight + self.delayed


def queue_depth(sqs: Any, url: str) -> QueueDepth:
    """The queue's approximate visible, in-flight and delayed counts."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return QueueDepth(
        visible=int(attributes.get("ApproximateNumberOfMessages", 0)),
        in_flight=int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
        delayed=int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)),
    )


@dataclass
class Hold:
    """The DLQ messages one run received and keeps hidden until it deletes or releases them."""

    sqs: Any
    url: str
    letters: list[DeadLetter] = field(default_factory=list)
    limit_reached: bool = False  # the run stopped reading at its limit: more may remain
    out_of_time: bool = False  # the run stopped reading to stay within its hold: more may remain
    release_failures: int = 0
    _handles: dict[str, str] = field(default_factory=dict)
    _positions: dict[str, int] = field(default_factory=dict)

    def take(self, message: Mapping[str, Any]) -> bool:
        """Hold one received message; True when it is new to this run.

        A message can come back (its hold ran out, or SQS delivered it twice): it stays one
        letter, with the newest receive count, and only its newest receipt handle deletes it.
        """
        letter = DeadLetter.from_sqs(message)
        position = self._positions.get(letter.message_id)
        if position is None:
            self._positions[letter.message_id] = len(self.letters)
            self.letters.append(letter)
        else:
            self.letters[position] = letter
        self._handles[letter.message_id] = str(message["ReceiptHandle"])
        return position is None

    def delete(self, message_id: str) -> None:
        """Delete one held message from the DLQ."""
        self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=self._handles[message_id])
        del self._handles[message_id]

    def release(self) -> None:
        """Make every message not deleted visible again at once (visibility 0)."""
        handles = list(self._handles.items())
        self._handles.clear()
        for start in range(0, len(handles), SQS_BATCH):
            entries = [
                {"Id": str(index), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                for index, (_, handle) in enumerate(handles[start : start + SQS_BATCH])
            ]
            try:
                response = self.sqs.change_message_visibility_batch(QueueUrl=self.url, Entries=entries)
            except AWS_ERRORS:
                # They come back by themselves when the hold runs out; never mask the run's own error.
                self.release_failures += len(entries)
                continue
            self.release_failures += len(response.get("Failed", []))


@contextmanager
def held_messages(
    sqs: Any,
    url: str,
    *,
    hold_seconds: int,
    max_messages: int,
    wait_seconds: int,
    monotonic: Callable[[], float],
) -> Iterator[Hold]:
    """Receive every DLQ message (up to `max_messages`), hidden for `hold_seconds`; on the way out,
    whatever way that is (Ctrl-C included), release each one not deleted.

    Reading stops at half the hold (`monotonic` measures it), or as soon as a receive brings back
    only messages already held: by then the first ones are visible again, so reading on would go
    round the same messages for ever while the run's hold on them runs out.

    Receiving counts: each message's ApproximateReceiveCount grows by one per read. The DLQ has
    no redrive policy of its own, so that count moves nothing anywhere.
    """
    hold = Hold(sqs=sqs, url=url)
    deadline = monotonic() + hold_seconds / 2
    try:
        while len(hold.letters) < max_messages:
            if monotonic() >= deadline:
                hold.out_of_time = True
                break
            response = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=min(SQS_BATCH, max_messages - len(hold.letters)),
                VisibilityTimeout=hold_seconds,
                WaitTimeSeconds=wait_seconds,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            received = response.get("Messages", [])
            if not received:
                break
            # Every message taken, seen or not: a message that came back has a new receipt handle.
            new = [hold.take(message) for message in received]
            if not any(new):
                hold.out_of_time = True
                break
        else:
            hold.limit_reached = True
        yield hold
    finally:
        hold.release()


def join(letters: Sequence[DeadLetter], repository: JobRepository) -> list[Joined]:
    """Each message with its job, read once per job (strongly consistent)."""
    jobs: dict[str, tuple[JobRecord | None, str | None]] = {}
    joined = []
    for letter in letters:
        if letter.job_id is None:
            joined.append(Joined(letter, None))
            continue
        if letter.job_id not in jobs:
            jobs[letter.job_id] = read_job(repository, letter.job_id)
        job, unreadable = jobs[letter.job_id]
        joined.append(Joined(letter, job, unreadable))
    return joined


def read_job(repository: JobRepository, job_id: str) -> tuple[JobRecord | None, str | None]:
    """The job (None when there is none), or why its record could not be read."""
    try:
        return repository.get_job(job_id), None
    except (KeyError, ValueError, TypeError) as error:
        # A record this code cannot read (a newer schema after a rollback, a hand edit): list it
        # and leave it alone rather than stop the whole run.
        return None, f"{type(error).__name__} while reading it"


@dataclass(frozen=True)
class Outcome:
    """One executed step."""

    step: Step
    result: Result
    detail: str


class Redrive:
    """Carries out a plan, step by step, exactly as planned (never re-planning on its own)."""

    def __init__(
        self,
        repository: JobRepository,
        payloads: PayloadStore,
        queues: Mapping[Lane, JobQueue],
        hold: Hold,
        *,
        now: Callable[[], datetime],
        grace: timedelta,
        budgets: OperatorBudgets | None,
    ) -> None:
        self._repository = repository
        self._payloads = payloads
        self._queues = queues
        self._hold = hold
        self._now = now
        self._grace = grace
        self._budgets = budgets  # a redrive reserves the new run's tokens (None: a stack without budgets)

    def run(self, steps: Sequence[Step], report: Callable[[Outcome], None]) -> list[Outcome]:
        """Every step in plan order (a duplicate always after the message carrying its redrive)."""
        outcomes: dict[str, Outcome] = {}
        for step in steps:
            outcome = self._step(step, outcomes)
            outcomes[step.letter.message_id] = outcome
            report(outcome)
        return list(outcomes.values())

    def _step(self, step: Step, done: Mapping[str, Outcome]) -> Outcome:
        if step.action in DISPATCHING:
            return self._dispatch(step)
        if step.action is Action.DROP_DUPLICATE:
            primary = done.get(step.primary or "")
            if primary is None or primary.result is not Result.DONE:
                return Outcome(step, Result.KEPT, "kept: the message carrying the redrive did not go through")
        if step.action in DROPPING:
            try:
                self._hold.delete(step.letter.message_id)
            except AWS_ERRORS as error:
                return Outcome(step, Result.FAILED, f"not deleted ({describe(error)}); rerun to retry")
            return Outcome(step, Result.DONE, "DLQ message deleted")
        return Outcome(step, Result.KEPT, "kept on the DLQ")

    def _dispatch(self, step: Step) -> Outcome:
        if step.job is None:
            raise ValueError(f"{step.action.value} makes no write")
        sent = dispatch(
            self._repository,
            self._payloads,
            self._queues,
            step.job,
            step.decision,
            now=self._now(),
            grace=self._grace,
            trace_id=step.letter.trace_id,
            rerun="rerun",
            budgets=self._budgets,
        )
        if sent.result is not Result.DONE:
            return Outcome(step, sent.result, sent.detail)
        try:
            self._hold.delete(step.letter.message_id)
        except AWS_ERRORS as error:
            return Outcome(
                step,
                Result.FAILED,
                f"{sent.detail}, but the DLQ message stayed ({describe(error)}); rerun",
            )
        return Outcome(step, Result.DONE, f"{sent.detail}; DLQ message deleted")


@dataclass(frozen=True)
class Listing:
    """What `dlq list` shows: each message, its job, and what `redrive --all` would do with it."""

    steps: list[Step]
    depth: QueueDepth
    limit_reached: bool
    out_of_time: bool
    now: datetime


def listing(
    sqs: Any,
    url: str,
    repository: JobRepository,
    now: datetime,
    *,
    max_messages: int,
    wait_seconds: int,
    hold_seconds: int = 30,
) -> Listing:
    """Read the whole DLQ (released again at once), join each message with its job, plan `--all`."""
    depth = queue_depth(sqs, url)
    with held_messages(
        sqs,
        url,
        hold_seconds=hold_seconds,
        max_messages=max_messages,
        wait_seconds=wait_seconds,
        monotonic=time.monotonic,
    ) as hold:
        joined = join(hold.letters, repository)
    return Listing(
        steps=plan(joined, now, PlanOptions()),
        depth=depth,
        limit_reached=hold.limit_reached,
        out_of_time=hold.out_of_time,
        now=now,
    )
