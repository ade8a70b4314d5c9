"""The redrive plan: one decision per job, from the job alone (and, on the DLQ, per message).

The plan is computed before anything changes, so `--dry-run` prints exactly what a real run does;
a real run then performs the plan step by step, each write conditional on the job as it was read
(DESIGN.md, "Lifecycle": the operator redrive modelled on Step Functions' RedriveExecution).
`decide_job` is the decision for one job, shared by `outlast ops dlq redrive` (a DLQ message and its
job) and `outlast ops jobs redrive` (a Failed job whose message is gone); `decide` adds what only a
DLQ message has: poison, and messages of jobs that need no re-run.

| job, as read                             | action                 | a run then                         |
|------------------------------------------|------------------------|------------------------------------|
| Succeeded                                | drop-succeeded         | deletes the message, no re-run     |
| Canceled                                 | drop-canceled          | deletes the message, no re-run     |
| Failed, retries_exhausted (any + force)  | redrive                | Failed -> Pending (redriveCount+1, |
|                                          |                        | attempts, stalls, crashes 0, not   |
|                                          |                        | isolated), sends, deletes          |
| Failed, another reason (worker_crashed   | needs-force            | keeps the message                  |
|   too), no --force                       |                        |                                    |
| Running, lease expired (a dead worker)   | recover                | -> Pending under the lease if it   |
|                                          |                        | is still expired, settling the     |
|                                          |                        | lease as the sweeper would, sends, |
|                                          |                        | deletes                            |
| ... its maxCrashes-th solo crash         | needs-force            | keeps (--force: recover, renewed)  |
| Pending, due, retries left (stuck)       | redispatch             | dispatchAt = now, sends, deletes   |
| Running under a live lease, cancel       | skip                   | keeps the message, says why        |
| requested, Pending backing off or out of |                        |                                    |
| retries, a record it cannot read         |                        |                                    |
| none (bad body, unknown or expired job)  | poison-purge-candidate | keeps (listed)                     |
|   ... with --purge-poison                | purge-poison           | deletes, never re-sends            |
| another message of the run carries the   | drop-duplicate         | deletes once that one went through |
|   same job's redrive                     |                        | (else keeps)                       |

For `jobs redrive`, Succeeded and Canceled jobs are skipped (there is no message to drop).

Every dispatching action (redrive, recover, redispatch) also renews the input's retention to the
job's expiry once its write went through (the job is going to run, whatever ended it before), and
then sends the job to the queue of its lane as written (`shared.ports.Lane.of`): a redrive resets
isolation, so the jobs queue; a recover or redispatch of an isolated job, the isolation queue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from shared.job import JobRecord
from shared.leases import ExpiredLeaseOutcome, expired_lease_outcome
from shared.lifecycle import JobStatus
from shared.messages import parse_job_message
from shared.ports import Lane, Transition

# Failures a re-run can fix by itself: the provider kept failing transiently until the attempts ran
# out. Every other code needs --force: a terminal provider answer (content_policy,
# context_length_exceeded, invalid_input, provider_auth) repeats unless its cause was fixed (a new
# key for provider_auth), and so does an extract answer that broke its schema twice or was cut by
# its token limit (invalid_output, output_truncated); input_missing repeats unless the input was
# restored, and worker_crashed (the job took down every worker it ran on alone) repeats unless the
# worker was fixed.
REDRIVABLE_ERROR_CODES = frozenset({"retries_exhausted"})
TERMINAL_ERROR_CODES = frozenset(
    {
        "content_policy",
        "context_length_exceeded",
        "invalid_input",
        "provider_auth",
        "invalid_output",
        "output_truncated",
    }
)
# Every job error code (DESIGN.md, "HTTP contract"): what `--error-code` accepts.
JOB_ERROR_CODES = REDRIVABLE_ERROR_CODES | TERMINAL_ERROR_CODES | {"input_missing", "worker_crashed"}

# The dispatch grace the CDK app deploys by default (DESIGN.md, "Delivery and execution").
DEFAULT_DISPATCH_GRACE_SECONDS = 900
# The maxCrashes the CDK app deploys by default (DESIGN.md, "Lifecycle": crash isolation).
DEFAULT_MAX_CRASHES = 2
# Inputs are kept this long after a job ends (DESIGN.md, "Idempotency": retention).
INPUT_RETENTION = timedelta(hours=24)


class Action(StrEnum):
    """What a run does with one job (and, on the DLQ, with its message)."""

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


# Conditional write, then a new message on the job's queue, then (DLQ) the DLQ message is deleted.
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
    """The operator's permissions for this run, and the stack setting the decisions depend on."""

    force: bool = False
    purge_poison: bool = False
    # The stack's maxCrashes: an expired lease on a job's maxCrashes-th solo claim fails it
    # with worker_crashed (shared.leases), so recovering it instead needs --force.
    max_crashes: int = DEFAULT_MAX_CRASHES


@dataclass(frozen=True)
class Decision:
    """What a run does with one job and why; for a dispatching action, its lane and its write."""

    action: Action
    why: str
    # Dispatching actions: where the job is sent, as it will be written (Lane.of of that record).
    lane: Lane | None = None
    # recover: how the write settles the expired lease (as the sweeper would: isolate, count a
    # crash, give the stall back), or None to start the job over (attempts renewed).
    lease: ExpiredLeaseOutcome | None = None


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
    """One message's place in the plan: the decision (the action and, in words, why)."""

    joined: Joined
    decision: Decision
    primary: str | None = None  # drop-duplicate: the message whose redrive this one rides on
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def action(self) -> Action:
        """What the run does with the message."""
        return self.decision.action

    @property
    def why(self) -> str:
        """Why, in words."""
        return self.decision.why

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


def decide(joined: Joined, now: datetime, options: PlanOptions) -> Decision:
    """The decision for one DLQ message, from the message and its job alone (no I/O, no clock)."""
    job = joined.job
    if joined.unreadable is not None:
        return Decision(
            Action.SKIP, f"the job record could not be read ({joined.unreadable}); repair it, then rerun"
        )
    if job is None or job.is_expired(now):
        return _poison(joined.letter, job, options)
    if job.status is JobStatus.SUCCEEDED:
        return Decision(
            Action.DROP_SUCCEEDED, "the job already Succeeded: the message is dropped, the job is not re-run"
        )
    if job.status is JobStatus.CANCELED:
        return Decision(
            Action.DROP_CANCELED, "the job was Canceled: the message is dropped, the job is not re-run"
        )
    return decide_job(job, now, options)


def decide_job(job: JobRecord, now: datetime, options: PlanOptions) -> Decision:
    """The decision for one job that exists and has not expired, from the job alone (no I/O, no clock).

    Succeeded and Canceled jobs are skipped: nothing re-runs them (on the DLQ, `decide` drops
    their messages instead).
    """
    return _BY_STATUS[job.status](job, now, options)


def _ended(job: JobRecord, _now: datetime, _options: PlanOptions) -> Decision:
    return Decision(Action.SKIP, f"the job already {job.status.value}: nothing to re-run")


def _cancel_requested(_job: JobRecord, _now: datetime, _options: PlanOptions) -> Decision:
    return Decision(
        Action.SKIP,
        "a cancel was requested: the lease holder or the sweeper ends the job as Canceled; rerun then",
    )


def _poison(letter: DeadLetter, job: JobRecord | None, options: PlanOptions) -> Decision:
    if letter.job_id is None:
        why = "poison: the body is not a job message"
    elif job is None:
        why = f"poison: no job {letter.job_id} exists"
    else:
        why = f"poison: the job expired at {_at(job.expires_at)} (expired jobs are gone)"
    if options.purge_poison:
        return Decision(Action.PURGE_POISON, why + "; purged, never re-sent")
    return Decision(Action.POISON_PURGE_CANDIDATE, why + "; kept (purge with --purge-poison)")


def _starts_over(job: JobRecord) -> str:
    """What renewing a job changes, in words (shared.adapters: the operator redrive's reset)."""
    parts = [
        f"redriveCount {job.redrive_count} -> {job.redrive_count + 1}",
        f"attempts {job.attempts} -> 0",
        f"stalls {job.stalls} -> 0",
    ]
    if job.crashes:
        parts.append(f"crashes {job.crashes} -> 0")
    if job.isolated:
        parts.append("isolation reset (it runs in shared batches again)")
    return ", ".join(parts)


def _failed(job: JobRecord, _now: datetime, options: PlanOptions) -> Decision:
    code = job.error.code if job.error else "no error code"
    redrive = f"Failed ({code}) -> Pending: {_starts_over(job)}, sent to the jobs queue now"
    if code in REDRIVABLE_ERROR_CODES:
        return Decision(Action.REDRIVE, redrive, lane=Lane.SHARED)
    if options.force:
        return Decision(Action.REDRIVE, f"{redrive} (forced past {code})", lane=Lane.SHARED)
    if code in TERMINAL_ERROR_CODES:
        kind = "a terminal reason"
    elif code == "worker_crashed":
        kind = "crashing every worker it ran on alone"
    else:
        kind = "a reason a re-run does not fix by itself"
    return Decision(
        Action.NEEDS_FORCE, f"Failed for {kind} ({code}): fix the cause, then redrive with --force"
    )


def _running(job: JobRecord, now: datetime, options: PlanOptions) -> Decision:
    if job.lease_expires_at is not None and job.lease_expires_at > now:
        return Decision(
            Action.SKIP,
            f"Running: a worker holds the lease until {_at(job.lease_expires_at)}; "
            "rerun after it finishes (the sweeper watches the lease meanwhile)",
        )
    expired = _at(job.lease_expires_at) if job.lease_expires_at else "(no lease)"
    why = f"stuck Running, lease expired at {expired} (its worker died) -> Pending under that lease"
    # What the lease's expiry means is the sweeper's own decision (shared.leases): the recover
    # writes the same accounting, so a job never pays for another job's crash here either.
    outcome = expired_lease_outcome(job, options.max_crashes)
    crashes = f"crashes {job.crashes} -> {job.crashes + 1} of maxCrashes {options.max_crashes}"
    if outcome.error_code == "worker_crashed":
        if not options.force:
            return Decision(
                Action.NEEDS_FORCE,
                f"stuck Running, lease expired at {expired}: its worker died under a claim it had alone "
                f"({crashes}), so the sweeper fails it with worker_crashed; find why, then --force "
                "recovers it and starts it over",
            )
        return Decision(
            Action.RECOVER,
            f"{why} (forced past worker_crashed, {crashes}): {_starts_over(job)}, sent to the jobs queue now",
            lane=Lane.SHARED,
        )
    if outcome.error_code is not None:  # out of retries: the recover starts it over, as a redrive
        return Decision(
            Action.RECOVER,
            f"{why}: out of retries (stalls {job.stalls}/{job.max_attempts}), so {_starts_over(job)}, "
            "sent to the jobs queue now",
            lane=Lane.SHARED,
        )
    if outcome.refund_stall:
        why += (
            ": its claim shared a worker invocation that died, so the stall is given back "
            f"(stalls {job.stalls} -> {job.stalls - 1}/{job.max_attempts}) and it runs alone from now on"
        )
    else:
        why += f": it had its worker to itself ({crashes}), stalls stay {job.stalls}/{job.max_attempts}"
    return Decision(
        Action.RECOVER, why + ", sent to the isolation queue now", lane=Lane.ISOLATION, lease=outcome
    )


def _pending(job: JobRecord, now: datetime, _options: PlanOptions) -> Decision:
    if job.stalls >= job.max_attempts:
        return Decision(
            Action.SKIP,
            f"Pending with no retries left (stalls {job.stalls}/{job.max_attempts}): the sweeper fails it "
            "(retries_exhausted) on its next pass; rerun then to redrive it",
        )
    if job.dispatch_at > now:
        return Decision(
            Action.SKIP,
            f"Pending, backing off until {_at(job.dispatch_at)}: its own message brings it back; "
            "rerun after that",
        )
    lane = Lane.of(job)
    return Decision(
        Action.REDISPATCH,
        f"stuck Pending since {_at(job.dispatch_at)}: dispatched again now to the {queue_name(lane)} "
        f"(attempts stay {job.attempts}, stalls {job.stalls}/{job.max_attempts})",
        lane=lane,
    )


_BY_STATUS: dict[JobStatus, Callable[[JobRecord, datetime, PlanOptions], Decision]] = {
    JobStatus.SUCCEEDED: _ended,
    JobStatus.CANCELED: _ended,
    JobStatus.FAILED: _failed,
    JobStatus.CANCELLATION_REQUESTED: _cancel_requested,
    JobStatus.RUNNING: _running,
    JobStatus.PENDING: _pending,
}


def queue_name(lane: Lane) -> str:
    """The queue a lane's jobs are sent to, in words."""
    return "isolation queue" if lane is Lane.ISOLATION else "jobs queue"


def plan(joined: Sequence[Joined], now: datetime, options: PlanOptions) -> list[Step]:
    """Decide every message; a second message for a job another one redrives becomes drop-duplicate.

    The oldest message of a job carries its redrive, so the plan does not depend on receive order.
    """
    ordered = sorted(joined, key=lambda j: (j.letter.sent_at, j.letter.message_id))
    carriers: dict[str, str] = {}
    steps: list[Step] = []
    for item in ordered:
        decision = decide(item, now, options)
        job_id = item.letter.job_id
        if decision.action in DISPATCHING and job_id is not None:
            if job_id in carriers:
                duplicate = Decision(
                    Action.DROP_DUPLICATE,
                    f"another message ({carriers[job_id]}) carries this job's {decision.action.value}; "
                    "this one is deleted once that went through",
                )
                steps.append(Step(item, duplicate, primary=carriers[job_id]))
                continue
            carriers[job_id] = item.letter.message_id
        steps.append(Step(item, decision, warnings=warnings_for(item.job, decision.action, now)))
    return steps


def warnings_for(job: JobRecord | None, action: Action, now: datetime) -> tuple[str, ...]:
    """What the operator should know before a step runs: a redrive of a job whose input may be gone."""
    if action is not Action.REDRIVE or job is None or job.updated_at + INPUT_RETENTION > now:
        return ()
    hours = INPUT_RETENTION.total_seconds() / 3600
    return (
        f"the job ended at {_at(job.updated_at)}, more than {hours:.0f} h ago: its input may be gone "
        "(the redrive renews its retention only if it is still there), and the re-run would then fail "
        "with input_missing",
    )


def write_for(step: Step, now: datetime, grace: timedelta) -> Transition | DispatchBump:
    """The one conditional write a dispatching DLQ step makes, stamped `now` (see `write_for_job`)."""
    if step.job is None:
        raise ValueError(f"{step.action.value} makes no write")
    return write_for_job(step.job, step.decision, now, grace)


def write_for_job(
    job: JobRecord, decision: Decision, now: datetime, grace: timedelta
) -> Transition | DispatchBump:
    """The one conditional write a dispatching decision makes for the job as read, stamped `now`.

    Every write re-checks the job as the plan read it (its status, and its lease where one holds
    it), so a job that moved on in between is left alone and reported instead.
    """
    if decision.action not in DISPATCHING:
        raise ValueError(f"{decision.action.value} makes no write")
    if decision.action is Action.REDISPATCH:
        return DispatchBump(job=job, now=now, sweep_at=now + grace)
    base = Transition(
        job_id=job.job_id,
        source=job.status,
        target=JobStatus.PENDING,
        now=now,
        dispatch_at=now,
        sweep_at=now + grace,
    )
    if decision.action is Action.REDRIVE:
        return replace(base, operator_redrive=True, renew_attempts=True)
    # The lease token alone is not enough: a slow worker's late heartbeat keeps its token and
    # renews the lease, and taking the job from it then would cost a second model call. So the
    # lease must still be expired at the moment of the write, as for the sweeper's own recovery.
    recover = replace(base, lease_token=job.lease_token, require_lease_expired=True)
    lease = decision.lease
    if lease is None:
        return replace(recover, renew_attempts=True)
    return replace(
        recover, isolate=lease.isolate, count_crash=lease.count_crash, refund_stall=lease.refund_stall
    )


def _at(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
