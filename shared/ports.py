"""Ports: what the domain needs from the outside world, as Protocols. Adapters live in shared.adapters."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from shared.errors import ConditionFailedError
from shared.fairness import message_group
from shared.lifecycle import TERMINAL, JobStatus
from shared.tiers import Tier

if TYPE_CHECKING:
    # Named in annotations only: importing the pydantic models here would make every user of a
    # port pay for them, the relay (which has none) included.
    from shared.cursor import ListPosition
    from shared.job import (
        BlobLocation,
        BudgetHold,
        IdempotencyRecord,
        JobError,
        JobInput,
        JobRecord,
        JobResult,
        JobSummary,
        StepOutput,
        Usage,
    )
    from shared.webhooks.egress import Destination


@dataclass(frozen=True)
class Lease:
    """Who holds a Running job, and until when (heartbeats move `expires_at`)."""

    token: str
    expires_at: datetime


class WriteKind(StrEnum):
    """Every kind of job write; the stream's readers tell them apart by the item's `w`."""

    SUBMIT = "submit"
    CLAIM = "claim"
    PROGRESS = "progress"
    RELEASE = "release"
    CANCEL = "cancel"
    TERMINAL = "terminal"
    REDRIVE = "redrive"
    BUMP = "bump"
    HEARTBEAT = "heartbeat"
    DEFER = "defer"


@dataclass(frozen=True)
class Transition:
    """One guarded move in the lifecycle, applied as a single conditional write.

    The write succeeds only while the job is still in `source` (and, where `lease_token` is
    given, still held by that lease; with `require_lease_expired`, only while that lease is
    still past its expiry at `now`); otherwise nothing changes and ConditionFailedError says
    who won.
    """

    job_id: str
    source: JobStatus
    target: JobStatus
    now: datetime
    lease_token: str | None = None
    new_lease: Lease | None = None
    # A claim: attempts and stalls + 1, only while stalls < maxAttempts; `solo` is recorded.
    count_attempt: bool = False
    solo: bool = False
    # A claim from the shared jobs queue: refused for an isolated job (its message is stale).
    require_not_isolated: bool = False
    # A claim's running slot (shared.slots): set, the job must be capped; None, it must not be.
    slot: int | None = None
    require_due: bool = False
    require_lease_expired: bool = False
    renew_attempts: bool = False
    operator_redrive: bool = False
    # An expired lease (shared.leases): isolate the job, count a crash, give the claim back.
    isolate: bool = False
    count_crash: bool = False
    refund_stall: bool = False
    # A deferral (the flex tier had no capacity): the claim made no call the job pays for, so it
    # gives back both the attempt and the stall it counted (DESIGN.md, "Cost tiers").
    refund_attempt: bool = False
    dispatch_at: datetime | None = None
    sweep_at: datetime | None = None
    cancel_requested_at: datetime | None = None
    error: JobError | None = None
    usage: Usage | None = None  # added to the job's usage (a call's tokens)
    usage_total: Usage | None = None  # replaces it (a multi-step job sums its checkpoints)
    extra_usage: Usage | None = None  # replaces JobRecord.extra_usage (with usage_total)
    # The usage this write records includes the stored result's (JobRecord.result_usage_counted).
    result_usage_counted: bool = False
    result_location: BlobLocation | None = None
    result_body: str | None = None  # a small result written into the job item (location "job")
    result_attempt: int | None = None  # a streamed result: the output attempt its text came from
    input_location: BlobLocation | None = None  # where the input is from now on (moved out of the item)
    # An operator redrive starts a new run: its budget hold replaces the last run's (None: the
    # new run holds nothing, its tenant has no limit or its input is gone).
    budget: BudgetHold | None = None
    # A batch job's batch expired or failed: its later calls run as a flex job's (shared.tiers).
    batch_fallback: bool = False
    # The poller hands the job back from this provider batch: its answers were kept, so none of
    # them is late usage (JobRecord.batches_seen; JobRepository.count_late_usage).
    batch_seen: str | None = None
    # What the provider billed for a batch's answers that were not kept (refused, cut by the limit,
    # off the schema): added to the usage and to the extra usage (no checkpoint holds it), so the
    # run's settlement counts it, as it counts any failed call that reported usage. Never with
    # `usage` or `usage_total` (one write cannot ADD to a path twice).
    unkept_usage: Usage | None = None
    # Only while the job is still in the run this many redrives in (the run a reservation was
    # made after: a redrive that raced another one must not carry a hold made for a stale run).
    require_redrive_count: int | None = None

    @property
    def kind(self) -> WriteKind:
        """The kind of write (`w` on the item), which the jobs stream's notifier filters on."""
        if self.new_lease is not None:
            return WriteKind.CLAIM
        if self.target in TERMINAL:
            return WriteKind.TERMINAL
        if self.operator_redrive:
            return WriteKind.REDRIVE
        if self.target is JobStatus.CANCELLATION_REQUESTED:
            return WriteKind.CANCEL
        return WriteKind.RELEASE


class TransitionConflictError(ConditionFailedError):
    """A guarded write lost; `current` is the job as it stood (None when it does not exist)."""

    def __init__(self, current: JobRecord | None) -> None:
        super().__init__("The job changed before this write.")
        self.current = current


@dataclass(frozen=True)
class JobPageSlice:
    """One page read from the owner's index, and where the next one starts."""

    items: list[JobSummary]
    next_position: ListPosition | None


class JobRepository(Protocol):
    """Durable storage of jobs and idempotency claims.

    Every method is one DynamoDB request (or a short fixed sequence) and every state change
    is conditional, so concurrent writers and retried calls can never corrupt a job.
    """

    def claim_idempotency_key(self, record: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
        """Write the claim unless a live one exists; return the existing claim (None when this call won)."""
        ...

    def find_idempotency_claim(self, scope_hash: str, now: datetime) -> IdempotencyRecord | None:
        """The live claim of this caller-and-key scope, read strongly consistent, or None."""
        ...

    def release_idempotency_claim(self, record: IdempotencyRecord) -> None:
        """Delete a claim this submit wrote, only while it still names this job: a submit refused
        after its claim (rate, budget) leaves nothing behind, so the client's retry starts fresh."""
        ...

    def fits_in_job_item(
        self, job: JobRecord, *, input_body: str | None = None, result_body: str | None = None
    ) -> bool:
        """True when this payload can ride in the job item and keep every write of it within one
        write unit (a pure size check, no request)."""
        ...

    def create_job(self, job: JobRecord, sweep_at: datetime) -> bool:
        """Write the job item unless it exists; True when this call created it.

        `sweep_at` is when the sweeper should look at the job if nothing else has moved it.
        """
        ...

    def get_job(self, job_id: str) -> JobRecord | None:
        """The job, read strongly consistent, or None."""
        ...

    def list_jobs(
        self, owner_key: str, status: JobStatus | None, limit: int, after: ListPosition | None, now: datetime
    ) -> JobPageSlice:
        """The owner's unexpired jobs, newest first; at most `limit` read per page."""
        ...

    def transition(self, transition: Transition) -> JobRecord:
        """Apply a guarded transition; return the job as written."""
        ...

    def take_submit_quota(self, owner_key: str, window_start: datetime, limit: int) -> bool:
        """Count one submit in the owner's minute window; False when the window is full."""
        ...

    def heartbeat(self, job_id: str, lease: Lease) -> JobRecord:
        """Extend a held lease (not an index key, so no index write); TransitionConflictError when lost.

        The job comes back as written, so the holder sees a CancellationRequested at once.
        """
        ...

    def hold_for_batch(self, job_id: str, hold: Lease) -> JobRecord:
        """A heartbeat's condition: the claim's lease becomes the batch hold (its expiry the batch's
        plus a grace) and the job shows `waitingFor: provider_batch` (DESIGN.md, "Cost tiers")."""
        ...

    def record_batch(self, job_id: str, hold_token: str, batch_id: str) -> JobRecord:
        """While the hold is the job's: the provider batch its calls are in."""
        ...

    def count_late_usage(self, job_id: str, batch_id: str, usage: Usage) -> JobRecord | None:
        """Add the usage of a batch's discarded answers to an ended job, once per (job, batch): only
        while the job is terminal and neither was handed back from the batch nor counted it yet.
        The tokens go onto its usage, its late tokens (which runs' settlements leave out) and its
        extra usage (which a redriven multi-step run's re-sum keeps), in the same write.
        The job as it now stands when its late usage is counted (now or by an earlier call: the
        budget's own write may still be owed), None when this batch's usage is not late for it
        (handed back, not ended, gone)."""
        ...

    def take_output_attempt(self, job_id: str, lease: Lease) -> JobRecord:
        """A heartbeat that also takes the job's next output attempt (`outputAttempt` + 1, never
        reset), before a streaming call writes its first event; TransitionConflictError when the
        lease is lost. Written as a heartbeat: nothing a client sees changes.

        The job comes back as written (its new `output_attempt`, and a CancellationRequested).
        """
        ...

    def record_progress(
        self,
        job_id: str,
        lease: Lease,
        completed_steps: int,
        usage: Usage | None,
        extra_usage: Usage | None,
    ) -> JobRecord:
        """The holder checkpointed steps: completedSteps, the job's usage (the checkpoints' sum plus
        `extra_usage`, JobRecord.extra_usage, also set) are set, stalls go back to 0 (this claim
        made progress) and the lease is extended, like a heartbeat; TransitionConflictError when
        the lease is lost. No index key changes.

        The job comes back as written, so the holder sees a CancellationRequested at once.
        """
        ...

    def bump_dispatch(self, job: JobRecord, now: datetime, sweep_at: datetime) -> JobRecord:
        """Move a Pending job's dispatchAt to now, only if nobody moved it since `job` was read."""
        ...

    def defer_sweep(self, job: JobRecord, sweep_at: datetime) -> None:
        """Move a watched job's sweepAt later (a long call's lease outlived its first expiry)."""
        ...

    def sweep_candidates(self, shard: str, due_by: datetime, limit: int) -> list[str]:
        """Ids of watched jobs in one sweeper-index shard whose sweepAt is at or before `due_by`."""
        ...


class PayloadStore(Protocol):
    """Inputs and results: a DynamoDB item when small, an S3 object when large."""

    def put_input(self, job_input: JobInput, location: BlobLocation, expires_at: datetime) -> None:
        """Store the input once; a repeat leaves the stored one (and its retention) alone."""
        ...

    def get_input(self, job_id: str, location: BlobLocation) -> JobInput | None:
        """The input, or None when it is gone."""
        ...

    def set_input_expiry(self, job_id: str, location: BlobLocation, at: datetime) -> None:
        """When TTL deletes the input item: 24 h after the job ended (DESIGN.md), or the job's
        expiry again when an operator redrives it."""
        ...

    def put_result(self, result: JobResult, location: BlobLocation, expires_at: datetime) -> JobResult:
        """Store the result unless one is there; return the one stored (this one, or an earlier
        claim's, whose output and usage the caller then adopts). A later writer never replaces it."""
        ...

    def find_result(self, job_id: str) -> tuple[BlobLocation, JobResult] | None:
        """A result some earlier claim wrote, and where it went (item or S3), or None."""
        ...

    def get_result(self, job_id: str, location: BlobLocation) -> JobResult | None:
        """The result, or None when it is gone."""
        ...


class StepStore(Protocol):
    """The checkpoints of a multi-step job: one item per step, beside the job."""

    def put_step(self, step: StepOutput, expires_at: datetime) -> StepOutput:
        """Store a step's output unless one is there; return the one stored (adopt it)."""
        ...

    def get_steps(self, job_id: str, now: datetime) -> dict[str, StepOutput]:
        """Every live checkpoint of the job by step id, read strongly consistent (an expired one is gone)."""
        ...

    def set_steps_expiry(self, job_id: str, step_ids: list[str], at: datetime) -> None:
        """Keep a long-lived job's checkpoints until `at` (they are written to live one retention)."""
        ...


@dataclass(frozen=True)
class JobMessage:
    """A queue message: the job id and a trace id, nothing else (the job item is the truth).

    `group` is not in the body: it is the message's `MessageGroupId` (the tenant, see
    shared.fairness), which SQS fair queues read. Every message sent carries one; a message
    parsed from a body received has none ("") until its job is read.
    """

    job_id: str
    trace_id: str
    group: str = ""

    @classmethod
    def of(cls, job: JobRecord, trace_id: str) -> JobMessage:
        """The message that dispatches `job`, in its tenant's group."""
        return cls(job_id=job.job_id, trace_id=trace_id, group=message_group(job.tenant))


class Lane(StrEnum):
    """Which queue a job is dispatched to: batches of ten, or one job per invocation."""

    SHARED = "shared"
    ISOLATION = "isolation"

    @classmethod
    def of(cls, job: JobRecord) -> Lane:
        """An isolated job is only ever dispatched to the isolation queue."""
        return cls.ISOLATION if job.isolated else cls.SHARED


class JobQueue(Protocol):
    """One SQS queue of job messages (the jobs queue or the isolation queue) and its DLQ."""

    def send_batch(self, messages: list[JobMessage]) -> list[JobMessage]:
        """Send in batches of 10; return the messages that were not accepted."""
        ...

    def send(self, message: JobMessage, delay_seconds: int = 0) -> None:
        """Send one message, invisible for `delay_seconds` (at most SQS's 900)."""
        ...

    def send_to_dlq(self, body: str, reason: str, job_id: str | None) -> None:
        """Park a message on the DLQ with the reason it can never succeed."""
        ...


@dataclass(frozen=True)
class ResponseSchema:
    """A structured answer's format (extract): a name and a JSON Schema in the strict subset."""

    name: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class CompletionRequest:
    """One model call: which model, the rendered messages, the output cap, and for extract the
    schema the answer must match (sent as strict structured outputs)."""

    model: str
    messages: list[dict[str, str]]
    max_output_tokens: int | None
    response_schema: ResponseSchema | None = None
    # The tier the call goes out at (flex: `service_tier: "flex"` and the flex timeout).
    tier: Tier = Tier.STANDARD
    # `prompt_cache_key`: calls that share a prefix share a key, so the provider routes them to
    # the same cache (per tenant, operation and prompt version; shared.prompts.cache_key).
    cache_key: str | None = None


@dataclass(frozen=True)
class Completion:
    """What the model answered and what it cost (and, streamed, the output attempt that wrote it);
    `truncated`: the answer stopped at its token cap (finish_reason `length`), which a structured
    answer cannot survive."""

    text: str
    usage: Usage | None
    output_attempt: int | None = None
    truncated: bool = False


class StreamControl:
    """Lets the worker stop a streaming call from another thread (a cancel, a lost lease, the
    deadline): the provider closes its stream at the next piece it receives, so the provider stops
    generating (DESIGN.md, "Cancel stops spending"). The stream is closed by the thread that reads
    it: closing an HTTP connection under a reader blocked in another thread is not safe."""

    def __init__(self) -> None:
        self._stopped = threading.Event()

    @property
    def stopped(self) -> bool:
        """True once `stop` was called."""
        return self._stopped.is_set()

    def stop(self) -> None:
        """Ask the call to stop."""
        self._stopped.set()


class StreamStopped(Exception):  # noqa: N818 - the answer to a stop the worker asked for
    """A streaming call ended because the worker stopped it; `usage` is what it had cost, by
    estimate when the provider did not report it."""

    def __init__(self, usage: Usage | None) -> None:
        super().__init__("The streaming call was stopped.")
        self.usage = usage


# Called with each piece of streamed text, on the call's thread, in order.
TextSink = Callable[[str], None]


class ModelProvider(Protocol):
    """A chat model. Raises TransientProviderError or TerminalProviderError, never SDK errors.

    Blocking and thread-safe: the worker runs several calls at once on its own threads, so
    one client (and its connection pool) serves every invocation of a container.
    """

    def complete(self, request: CompletionRequest) -> Completion:
        """Make exactly one model call (no retries inside: retry policy lives in the worker)."""
        ...

    def stream(self, request: CompletionRequest, on_text: TextSink, control: StreamControl) -> Completion:
        """Make exactly one streaming call, handing each piece of text to `on_text` as it arrives.

        Returns the whole text and its usage (an estimate, flagged, when the stream ended without
        a usage report). A stream cut mid-way is a TransientProviderError carrying the estimated
        usage of what was generated; a stop through `control` ends it with StreamStopped.
        """
        ...


class SecretSource(Protocol):
    """Secrets by name, cached by the adapter (never logged, never in env vars)."""

    def get(self, name: str) -> str:
        """The secret's current value."""
        ...


class TransportFailure(StrEnum):
    """Why a webhook attempt got no HTTP answer."""

    TIMEOUT = "timeout"  # the attempt's deadline passed (connect, TLS, send and read together)
    CONNECTION = "connection"  # refused, reset, unreachable
    TLS = "tls"  # handshake or certificate verification failed
    PROTOCOL = "protocol"  # the peer answered something that is not HTTP/1.x


@dataclass(frozen=True)
class PostResult:
    """What one webhook attempt got: a status, or a transport failure; never the response body.

    `retry_after` is the raw Retry-After header (seconds or an HTTP date) when one came back.
    A redirect is an answer like any other: its 3xx status is returned, never followed.
    """

    status: int | None
    failure: TransportFailure | None
    retry_after: str | None
    latency_ms: int

    @property
    def delivered(self) -> bool:
        """True for a 2xx answer: the only outcome that counts as delivered."""
        return self.status is not None and 200 <= self.status < 300


class WebhookPoster(Protocol):
    """POSTs one signed webhook body to a checked Destination.

    The adapter connects to `destination.address` and never resolves the name again; TLS
    sends `destination.host` as SNI and verifies the certificate against it. No redirects,
    no proxies, one deadline over the whole attempt.
    """

    def post(self, destination: Destination, body: bytes, headers: Mapping[str, str]) -> PostResult:
        """Make exactly one attempt; transport errors come back as a PostResult, never raised."""
        ...
