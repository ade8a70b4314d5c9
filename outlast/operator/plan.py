"""The DLQ redrive plan: one decision per dead-lettered message, from the message and its job alone.

The plan is computed before anything changes, so `--dry-run` prints exactly what a real run does;
a real run then performs the plan step by step, each write conditional on the job as it was read
(DESIGN.md, "Lifecycle": the operator redrive modelled on Step Functions' RedriveExecution).

| job, as read                             | action                 | a run then                         |
|------------------------------------------|------------------------|------------------------------------|
| Succeeded                                | drop-succeeded         | deletes the message, no re-run     |
| Canceled                                 | drop-canceled          | deletes the message, no re-run     |
| Failed, retries_exhausted (any + force)  | redrive                | Failed -> Pending (redriveCount+1, |
|                                          |                        | attempts 0), sends, deletes        |
| Failed, another reason, no --force       | needs-force            | keeps the message                  |
| Running, lease expired (a dead worker)   | recover                | -> Pending under the lease if it   |
|                                          |                        | is still expired, sends, deletes   |
| Pending, due, attempts left (stuck)      | redispatch             | dispatchAt = now, sends, deletes   |
| Running under a live lease, cancel       | skip                   | keeps the message, says why        |
| requested, Pending backing off or out of |                        |                                    |
| attempts, a record it cannot read        |                        |                                    |
| none (bad body, unknown or expired job)  | poison-purge-candidate | keeps (listed)                     |
|   ... with --purge-poison                | purge-poison           | deletes, never re-sends            |
| another message of the run carries the   | drop-duplicate         | deletes once that one went through |
|   same job's redrive                     |                        | (else keeps)                       |

Every dispatching action (redrive, recover, redispatch) also renews the input's retention to the
job's expiry once its write went through: the job is going to run, whatever ended it before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from shared.job import JobRecord
from shared.lifecycle import JobStatus
from shared.messages import parse_job_message
from shared.ports import Transition

# Failures a re-run can fix by itself: the provider kept failing transiently until the attempts ran
# out. Every other code needs --force: a terminal provider answer (content_policy,
# context_length_exceeded, invalid_input, provider_auth) repeats unless its cause was fixed (a new
# key for provider_auth), input_missing repeats unless the input was restored, and worker_crashed
# (the job took down every worker it ran on alone) repeats unless the worker was fixed.
REDRIVABLE_ERROR_CODES = frozenset({"retries_exhausted"})
TERMINAL_ERROR_CODES = frozenset(
    {"content_policy", "context_length_exceeded", "invalid_input", "provider_auth"}
)
# Every job error code (DESIGN.md, "HTTP contract"): what `--error-code` accepts.
JOB_ERROR_CODES = REDRIVABLE_ERROR_CODES | TERMINAL_ERROR_CODES | {"input_missing", "worker_crashed"}

# The dispatch grace the CDK app deploys by default (DESIGN.md, "Delivery and execution").
DEFAULT_DISPATCH_GRACE_SECONDS = 900
# Inputs are kept this long after a job ends (DESIGN.md, "Idempotency": retention).
INPUT_RETENTION = timedelta(hours=24)


class Action(StrEnum):
    """What a run does with one DLQ message."""

    REDRIVE = "redrive"
    RECOVER = "recover"
    REDISPATCH = "redispatch"
    DROP_SUCCEEDED = "drop-succeeded"
    DROP_CANCELED = "drop-canceled"
    DROP_DUPLICATE = "drop-duplicate"
    PURGE_POISON = "purge-poison"
    POISON_PURGE_CANDIDATE = "poison-purge-candidate"
    NEEDS_FORCE = "needs-force"
    SKIP = "skip"


# Conditional write, then a new message on the jobs queue, then the DLQ message is deleted.
DISPATCHING = frozenset({Action.REDRIVE, Action.RECOVER, Action.REDISPATCH})
# The DLQ message is deleted and nothing is sent.
DROPPING = frozenset(
    {Action.DROP_SUCCEEDED, Action.DROP_CANCELED, Action.DROP_DUPLICATE, Action.PURGE_POISON}
)
# The DLQ message stays (released at once, so it is visible again).
KEEPING = frozenset({Action.POISON_PURGE_CANDIDATE, Action.NEEDS_FORCE, Action.SKIP})


@dataclass(frozen=True)
class DeadLetter:
    """One message read from the DLQ: what it says, and what SQS and the worker said about it."""

    message_id: str
    body: str
    job_id: str | None  # from the body; None when the body is not a job message
    trace_id: str | None
    reason: str | None  # the `reason` attribute the worker sets when it parks poison itself
    receive_count: int  # ApproximateReceiveCount, this read included
    sent_at: datetime

    @classmethod
    def from_sqs(cls, message: Mapping[str, Any]) -> DeadLetter:
        """Parse a ReceiveMessage entry (AttributeNames and MessageAttributeNames `All`)."""
        attributes = message.get("Attributes", {})
        reason = message.get("MessageAttributes", {}).get("reason", {}).get("StringValue")
        parsed = parse_job_message(str(message.get("Body", "")))
        sent_ms = int(attributes.get("SentTimestamp", "0"))
        return cls(
            message_id=str(message["MessageId"]),
            body=str(message.get("Body", "")),
            job_id=parsed.job_id if parsed else None,
            trace_id=parsed.trace_id if parsed else None,
            reason=str(reason) if reason is not None else None,
            receive_count=int(attributes.get("ApproximateReceiveCount", "0")),
            sent_at=datetime.fromtimestamp(sent_ms / 1000, UTC),
        )

    @property
    def source(self) -> str:
        """Who put it there: the worker (with its reason) or the queue's redrive policy."""
        return f"worker: {self.reason}" if self.reason else "redrive policy"


@dataclass(frozen=True)
class Joined:
    """A DLQ message and its job as read (None: no such job), or why the job could not be read."""

    letter: DeadLetter
    job: JobRecord | None
    unreadable: str | None = None


@dataclass(frozen=True)
class PlanOptions:
    """The operator's permissions for this run."""

    force: bool = False
    purge_poison: bool = False


@dataclass(frozen=True)
class Selection:
    """Which DLQ messages a run acts on; everything else is left exactly as it was."""

    job_ids: frozenset[str] = frozenset()
    message_ids: frozenset[str] = frozenset()
    error_codes: frozenset[str] = frozenset()
    everything: bool = False
    # --purge-poison. Alone, it selects every poison message; beside another selector it selects
    # nothing more (PlanOptions.purge_poison then only lets the run purge the poison they picked),
    # so `--job-id X --purge-poison` can never delete a message nobody named.
    poison: bool = False

    @property
    def empty(self) -> bool:
        """True when nothing at all is selected."""
        return not (self.explicit or self.poison)

    @property
    def explicit(self) -> bool:
        """True when a selector other than --purge-poison was given."""
        return bool(self.job_ids or self.message_ids or self.error_codes or self.everything)

    def selects(self, joined: Joined, now: datetime) -> bool:
        """True when the message is one this run acts on."""
        letter, job = joined.letter, joined.job
        if self.explicit:
            return (
                self.everything
                or letter.message_id in self.message_ids
                or (letter.job_id is not None and letter.job_id in self.job_ids)
                or (job is not None and job.error is not None and job.error.code in self.error_codes)
            )
        return self.poison and joined.unreadable is None and is_poison(job, now)


@dataclass(frozen=True)
class Step:
    """One message's place in the plan: the action and, in words, why."""

    joined: Joined
    action: Action
    why: str
    primary: str | None = None  # drop-duplicate: the message whose redrive this one rides on
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def letter(self) -> DeadLetter:
        """The message."""
        return self.joined.letter

    @property
    def job(self) -> JobRecord | None:
        """The job as read when the plan was made (the guard of every write)."""
        return self.joined.job


@dataclass(frozen=True)
class DispatchBump:
    """A Pending job stays Pending, dispatched again now (JobRepository.bump_dispatch)."""

    job: JobRecord
    now: datetime
    sweep_at: datetime


def is_poison(job: JobRecord | None, now: datetime) -> bool:
    """No job to run: none was named, none exists, or it expired (expired jobs are gone)."""
    return job is None or job.is_expired(now)


def decide(joined: Joined, now: datetime, options: PlanOptions) -> tuple[Action, str]:
    """The action for one message, from the message and its job alone (no I/O, no clock)."""
    job = joined.job
    if joined.unreadable is not None:
        return Action.SKIP, f"the job record could not be read ({joined.unreadable}); repair it, then rerun"
    if job is None or job.is_expired(now):
        return _poison(joined.letter, job, options)
    return _BY_STATUS[job.status](job, now, options)


def _succeeded(_job: JobRecord, _now: datetime, _options: PlanOptions) -> tuple[Action, str]:
    return Action.DROP_SUCCEEDED, "the job already Succeeded: the message is dropped, the job is not re-run"


def _canceled(_job: JobRecord, _now: datetime, _options: PlanOptions) -> tuple[Action, str]:
    return Action.DROP_CANCELED, "the job was Canceled: the message is dropped, the job is not re-run"


def _cancel_requested(_job: JobRecord, _now: datetime, _options: PlanOptions) -> tuple[Action, str]:
    return Action.SKIP, (
        "a cancel was requested: the lease holder or the sweeper ends the job as Canceled; "
        "rerun then to drop this message"
    )


def _poison(letter: DeadLetter, job: JobRecord | None, options: PlanOptions) -> tuple[Action, str]:
    if letter.job_id is None:
        why = "poison: the body is not a job message"
    elif job is None:
        why = f"poison: no job {letter.job_id} exists"
    else:
        why = f"poison: the job expired at {_at(job.expires_at)} (expired jobs are gone)"
    if options.purge_poison:
        return Action.PURGE_POISON, why + "; purged, never re-sent"
    return Action.POISON_PURGE_CANDIDATE, why + "; kept (purge with --purge-poison)"


def _failed(job: JobRecord, _now: datetime, options: PlanOptions) -> tuple[Action, str]:
    code = job.error.code if job.error else "no error code"
    redrive = (
        f"Failed ({code}) -> Pending: redriveCount {job.redrive_count} -> {job.redrive_count + 1}, "
        f"attempts {job.attempts} -> 0, dispatched now"
    )
    if code in REDRIVABLE_ERROR_CODES:
        return Action.REDRIVE, redrive
    if options.force:
        return Action.REDRIVE, f"{redrive} (forced past {code})"
    kind = "a terminal reason" if code in TERMINAL_ERROR_CODES else "a reason a re-run does not fix by itself"
    return Action.NEEDS_FORCE, f"Failed for {kind} ({code}): fix the cause, then redrive with --force"


def _running(job: JobRecord, now: datetime, _options: PlanOptions) -> tuple[Action, str]:
    if job.lease_expires_at is not None and job.lease_expires_at > now:
        return Action.SKIP, (
            f"Running: a worker holds the lease until {_at(job.lease_expires_at)}; "
            "rerun after it finishes (the sweeper watches the lease meanwhile)"
        )
    expired = _at(job.lease_expires_at) if job.lease_expires_at else "(no lease)"
    why = f"stuck Running, lease expired at {expired} (its worker died) -> Pending under that lease"
    if job.attempts >= job.max_attempts:
        redrives = f"redriveCount {job.redrive_count} -> {job.redrive_count + 1}"
        why += f": out of attempts, so {redrives}, attempts -> 0"
    else:
        why += f", attempts stay {job.attempts}/{job.max_attempts}"
    return Action.RECOVER, why + ", dispatched now"


def _pending(job: JobRecord, now: datetime, _options: PlanOptions) -> tuple[Action, str]:
    if job.attempts >= job.max_attempts:
        return Action.SKIP, (
            "Pending with no attempts left: the sweeper fails it (retries_exhausted) on its next pass; "
            "rerun then to redrive it"
        )
    if job.dispatch_at > now:
        return Action.SKIP, (
            f"Pending, backing off until {_at(job.dispatch_at)}: its own message brings it back; "
            "rerun after that"
        )
    return Action.REDISPATCH, (
        f"stuck Pending since {_at(job.dispatch_at)}: dispatched again now "
        f"(attempts stay {job.attempts}/{job.max_attempts})"
    )


_BY_STATUS: dict[JobStatus, Callable[[JobRecord, datetime, PlanOptions], tuple[Action, str]]] = {
    JobStatus.SUCCEEDED: _succeeded,
    JobStatus.CANCELED: _canceled,
    JobStatus.FAILED: _failed,
    JobStatus.CANCELLATION_REQUESTED: _cancel_requested,
    JobStatus.RUNNING: _running,
    JobStatus.PENDING: _pending,
}


def plan(joined: Sequence[Joined], now: datetime, options: PlanOptions) -> list[Step]:
    """Decide every message; a second message for a job another one redrives becomes drop-duplicate.

    The oldest message of a job carries its redrive, so the plan does not depend on receive order.
    """
    ordered = sorted(joined, key=lambda j: (j.letter.sent_at, j.letter.message_id))
    carriers: dict[str, str] = {}
    steps: list[Step] = []
    for item in ordered:
        action, why = decide(item, now, options)
        job_id = item.letter.job_id
        if action in DISPATCHING and job_id is not None:
            if job_id in carriers:
                steps.append(
                    Step(
                        item,
                        Action.DROP_DUPLICATE,
                        f"another message ({carriers[job_id]}) carries this job's {action.value}; "
                        "this one is deleted once that went through",
                        primary=carriers[job_id],
                    )
                )
                continue
            carriers[job_id] = item.letter.message_id
        steps.append(Step(item, action, why, warnings=_warnings(item, action, now)))
    return steps


def _warnings(item: Joined, action: Action, now: datetime) -> tuple[str, ...]:
    job = item.job
    if action is not Action.REDRIVE or job is None or job.updated_at + INPUT_RETENTION > now:
        return ()
    hours = INPUT_RETENTION.total_seconds() / 3600
    return (
        f"the job ended at {_at(job.updated_at)}, more than {hours:.0f} h ago: its input may be gone "
        "(the redrive renews its retention only if it is still there), and the re-run would then fail "
        "with input_missing",
    )


def write_for(step: Step, now: datetime, grace: timedelta) -> Transition | DispatchBump:
    """The one conditional write a dispatching step makes, stamped `now`.

    Every write re-checks the job as the plan read it (its status, and its lease where one holds
    it), so a job that moved on in between is left alone and reported instead.
    """
    job = step.job
    if job is None or step.action not in DISPATCHING:
        raise ValueError(f"{step.action.value} makes no write")
    if step.action is Action.REDISPATCH:
        return DispatchBump(job=job, now=now, sweep_at=now + grace)
    base = Transition(
        job_id=job.job_id,
        source=job.status,
        target=JobStatus.PENDING,
        now=now,
        dispatch_at=now,
        sweep_at=now + grace,
    )
    if step.action is Action.REDRIVE:
        return replace(base, operator_redrive=True, renew_attempts=True)
    # The lease token alone is not enough: a slow worker's late heartbeat keeps its token and
    # renews the lease, and taking the job from it then would cost a second model call. So the
    # lease must still be expired at the moment of the write, as for the sweeper's own recovery.
    return replace(
        base,
        lease_token=job.lease_token,
        require_lease_expired=True,
        renew_attempts=job.attempts >= job.max_attempts,
    )


def _at(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
