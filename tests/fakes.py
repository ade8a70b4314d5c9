"""In-memory fakes of the ports in shared.ports, with the DynamoDB adapter's conditional semantics.

Tests use these instead of mocks. Each method keeps the conditions of
shared/adapters/dynamodb_jobs.py, so a use case that misbehaves against DynamoDB misbehaves
here too. Every successful write is appended to `writes` (the method's name), so a test can
assert that nothing was written. To inject a fault, subclass a fake in the test and override
one method; the fakes themselves carry no fault flags.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.adapters.dynamo_items import fits_in_job_item, sweep_shard
from shared.clock import to_iso
from shared.contract import Operation
from shared.cursor import ListPosition
from shared.errors import StorageUnavailableError
from shared.ids import new_job_id, new_sequence_id
from shared.job import (
    BlobLocation,
    IdempotencyRecord,
    JobInput,
    JobRecord,
    JobResult,
    JobSummary,
    StepOutput,
    Usage,
    add_usage,
    handed_back_marker,
    late_marker,
)
from shared.lifecycle import TERMINAL, JobStatus, check_transition
from shared.ports import JobPageSlice, Lease, Transition, TransitionConflictError

# Statuses in which a job is held by a lease (the adapter keeps the lease when moving between them).
_LEASE_STATUSES = frozenset({JobStatus.RUNNING, JobStatus.CANCELLATION_REQUESTED})
DEFAULT_START = datetime(2030, 1, 15, 12, 0, 30, 250_000, tzinfo=UTC)


class FakeClock:
    """A clock that moves only when told to; always timezone-aware UTC."""

    def __init__(self, start: datetime = DEFAULT_START) -> None:
        self._now = _utc(start)

    def now(self) -> datetime:
        """The instant the test set."""
        return self._now

    def set(self, instant: datetime) -> None:
        """Jump to an instant."""
        self._now = _utc(instant)

    def advance(self, delta: timedelta = timedelta(), **parts: float) -> datetime:
        """Move forward by `delta` plus `timedelta(**parts)`; returns the new instant."""
        self._now += delta + timedelta(**parts)
        return self._now


def _utc(instant: datetime) -> datetime:
    if instant.tzinfo is None:
        raise ValueError("FakeClock needs a timezone-aware instant")
    return instant.astimezone(UTC)


def list_key(job: JobRecord) -> str:
    """The list-index sort key the DynamoDB adapter writes: submission time, then the sequence id."""
    return f"{to_iso(job.created_at)}#{job.sequence_id}"


class InMemoryJobRepository:
    """JobRepository in dictionaries, condition for condition like DynamoJobRepository."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobRecord] = {}
        self.claims: dict[str, IdempotencyRecord] = {}
        self.sweep_at: dict[str, datetime] = {}  # the sparse sweeper index: watched jobs only
        self.submits: Counter[tuple[str, datetime]] = Counter()
        self.writes: list[str] = []
        self.write_kinds: dict[str, str] = {}  # `w` of each job's last write, as the adapter sets it

    def _written(self, job: JobRecord, kind: str) -> JobRecord:  # kind: a shared.ports.WriteKind
        """Every job write counts itself (revision + 1) and says what it was (`w`), like the adapter."""
        written = job.model_copy(update={"revision": job.revision + 1})
        self.jobs[written.job_id] = written
        self.write_kinds[written.job_id] = kind
        return written

    def claim_idempotency_key(self, record: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
        """`attribute_not_exists(pk) OR expiresAt < :now`: an expired claim is overwritten."""
        existing = self.claims.get(record.scope_hash)
        if existing is not None and not existing.expires_at < now:
            return existing
        self.claims[record.scope_hash] = record
        self.writes.append("claim_idempotency_key")
        return None

    def find_idempotency_claim(self, scope_hash: str, now: datetime) -> IdempotencyRecord | None:
        """A consistent GetItem; an expired claim (not yet deleted by TTL) counts as absent."""
        existing = self.claims.get(scope_hash)
        return None if existing is None or existing.expires_at < now else existing

    def release_idempotency_claim(self, record: IdempotencyRecord) -> None:
        """`jobId = :id`: deleted only while it still names this submit's job."""
        existing = self.claims.get(record.scope_hash)
        if existing is not None and existing.job_id == record.job_id:
            del self.claims[record.scope_hash]
            self.writes.append("release_idempotency_claim")

    def fits_in_job_item(
        self, job: JobRecord, *, input_body: str | None = None, result_body: str | None = None
    ) -> bool:
        """The adapter's own size rules (pure)."""
        return fits_in_job_item(job, input_body=input_body, result_body=result_body)

    def create_job(self, job: JobRecord, sweep_at: datetime) -> bool:
        """`attribute_not_exists(pk)`: True only for the call that created it."""
        if job.job_id in self.jobs:
            return False
        self.jobs[job.job_id] = job  # a new job is its own first write (revision 1)
        self.write_kinds[job.job_id] = "submit"
        self.sweep_at[job.job_id] = sweep_at
        self.writes.append("create_job")
        return True

    def get_job(self, job_id: str) -> JobRecord | None:
        """The job as last written (reads here are always consistent)."""
        return self.jobs.get(job_id)

    def list_jobs(
        self, owner_key: str, status: JobStatus | None, limit: int, after: ListPosition | None, now: datetime
    ) -> JobPageSlice:
        """Query + Limit + FilterExpression on expiry, then the jobs read and filtered by status.

        `limit` index entries are read first and filtered afterwards, so a page can be short or
        empty while a next position exists. Like DynamoDB (and unlike moto), a read that stopped
        at the limit names its last item even when nothing follows, so a last page may be empty.
        """
        owned = sorted(
            (job for job in self.jobs.values() if job.owner_key == owner_key),
            key=_list_order,
            reverse=True,
        )
        if after is not None:
            start = (after.list_key, after.job_id)
            owned = [job for job in owned if _list_order(job) < start]
        read = owned[:limit]
        next_position = (
            ListPosition(list_key=_list_order(read[-1])[0], job_id=read[-1].job_id)
            if read and len(read) == limit
            else None
        )
        visible: list[JobSummary] = [
            job for job in read if job.expires_at > now and (status is None or job.status is status)
        ]
        return JobPageSlice(items=visible, next_position=next_position)

    def transition(self, transition: Transition) -> JobRecord:
        """One guarded write: source status, lease token, due time and attempts, then the changes."""
        check_transition(transition.source, transition.target, operator_redrive=transition.operator_redrive)
        current = self.jobs.get(transition.job_id)
        if current is None or not _conditions_hold(current, transition):
            raise TransitionConflictError(current)
        changes = {**_lifecycle_changes(current, transition), **_field_changes(current, transition)}
        written = self._written(current.model_copy(update=changes), transition.kind)
        if transition.target in TERMINAL:
            self.sweep_at.pop(written.job_id, None)
        elif transition.sweep_at is not None:
            self.sweep_at[written.job_id] = transition.sweep_at
        self.writes.append("transition")
        return written

    def take_submit_quota(self, owner_key: str, window_start: datetime, limit: int) -> bool:
        """`attribute_not_exists(count) OR count < :limit`, then count + 1."""
        window = (owner_key, window_start)
        if self.submits[window] >= limit:
            return False
        self.submits[window] += 1
        self.writes.append("take_submit_quota")
        return True

    def heartbeat(self, job_id: str, lease: Lease) -> JobRecord:
        """`status IN (Running, CancellationRequested) AND leaseToken = :token`; moves only the expiry."""
        current = self.jobs.get(job_id)
        if current is None or current.status not in _LEASE_STATUSES or current.lease_token != lease.token:
            raise TransitionConflictError(current)
        written = self._written(
            current.model_copy(update={"lease_expires_at": lease.expires_at}), "heartbeat"
        )
        self.writes.append("heartbeat")
        return written

    def hold_for_batch(self, job_id: str, hold: Lease) -> JobRecord:
        """A heartbeat's condition; the expiry moves to the hold's and waitingFor is set (as progress)."""
        current = self.jobs.get(job_id)
        if current is None or current.status not in _LEASE_STATUSES or current.lease_token != hold.token:
            raise TransitionConflictError(current)
        changes = {"lease_expires_at": hold.expires_at, "waiting_for": "provider_batch", "slot": None}
        written = self._written(current.model_copy(update=changes), "progress")
        self.writes.append("hold_for_batch")
        return written

    def record_batch(self, job_id: str, hold_token: str, batch_id: str) -> JobRecord:
        """`status IN (Running, CancellationRequested) AND leaseToken = :hold`; sets batchId."""
        current = self.jobs.get(job_id)
        if current is None or current.status not in _LEASE_STATUSES or current.lease_token != hold_token:
            raise TransitionConflictError(current)
        written = self._written(current.model_copy(update={"batch_id": batch_id}), "heartbeat")
        self.writes.append("record_batch")
        return written

    def count_late_usage(self, job_id: str, batch_id: str, usage: Usage) -> JobRecord | None:
        """Terminal, and neither handed back from the batch nor counted yet: the usage, the late
        tokens and the extra usage add up and the late marker comes (written as a heartbeat); else
        the job when it was counted before."""
        current = self.jobs.get(job_id)
        late = late_marker(batch_id)
        if current is None or current.status not in TERMINAL:
            return None
        if handed_back_marker(batch_id) in current.batches_seen or late in current.batches_seen:
            return current if late in current.batches_seen else None
        tokens = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
        changes = {
            "usage": add_usage(current.usage, usage),
            "late_tokens": current.late_tokens + tokens.input_tokens + tokens.output_tokens,
            # The adapter keeps the extra usage's counts only (its flags are the usage's).
            "extra_usage": add_usage(current.extra_usage, tokens),
            "batches_seen": current.batches_seen | {late},
        }
        written = self._written(current.model_copy(update=changes), "heartbeat")
        self.writes.append("count_late_usage")
        return written

    def take_output_attempt(self, job_id: str, lease: Lease) -> JobRecord:
        """A heartbeat's condition; outputAttempt + 1 (written as a heartbeat)."""
        current = self.jobs.get(job_id)
        if current is None or current.status not in _LEASE_STATUSES or current.lease_token != lease.token:
            raise TransitionConflictError(current)
        written = self._written(
            current.model_copy(
                update={"lease_expires_at": lease.expires_at, "output_attempt": current.output_attempt + 1}
            ),
            "heartbeat",
        )
        self.writes.append("take_output_attempt")
        return written

    def record_progress(
        self,
        job_id: str,
        lease: Lease,
        completed_steps: int,
        usage: Usage | None,
        extra_usage: Usage | None,
    ) -> JobRecord:
        """A heartbeat's condition; sets completedSteps, usage and extra usage, stalls back to 0."""
        current = self.jobs.get(job_id)
        if current is None or current.status not in _LEASE_STATUSES or current.lease_token != lease.token:
            raise TransitionConflictError(current)
        changes: dict[str, Any] = {
            "lease_expires_at": lease.expires_at,
            "completed_steps": completed_steps,
            "stalls": 0,
        }
        if usage is not None:
            changes["usage"] = _sticky_estimate(current.usage, usage)
        if extra_usage is not None:
            changes["extra_usage"] = extra_usage
        written = self._written(current.model_copy(update=changes), "progress")
        self.writes.append("record_progress")
        return written

    def bump_dispatch(self, job: JobRecord, now: datetime, sweep_at: datetime) -> JobRecord:
        """`status = Pending AND dispatchAt = :read`: at most one bump per read of the job."""
        current = self.jobs.get(job.job_id)
        if (
            current is None
            or current.status is not JobStatus.PENDING
            or current.dispatch_at != job.dispatch_at
        ):
            raise TransitionConflictError(current)
        written = self._written(current.model_copy(update={"dispatch_at": now, "updated_at": now}), "bump")
        self.sweep_at[job.job_id] = sweep_at
        self.writes.append("bump_dispatch")
        return written

    def defer_sweep(self, job: JobRecord, sweep_at: datetime) -> None:
        """`status = :read [AND leaseToken = :read]`; moves sweepAt of a job still in the index."""
        current = self.jobs.get(job.job_id)
        if (
            current is None
            or current.status is not job.status
            or (job.lease_token is not None and current.lease_token != job.lease_token)
        ):
            raise TransitionConflictError(current)
        if job.job_id in self.sweep_at:
            self.sweep_at[job.job_id] = sweep_at
        self._written(current, "defer")
        self.writes.append("defer_sweep")

    def sweep_candidates(self, shard: str, due_by: datetime, limit: int) -> list[str]:
        """Oldest first from one shard of the sparse sweeper index (only watched jobs are in it)."""
        due = sorted(
            (at, job_id)
            for job_id, at in self.sweep_at.items()
            if sweep_shard(job_id) == shard and at <= due_by
        )
        return [job_id for _, job_id in due[:limit]]


def _list_order(job: JobRecord) -> tuple[str, str]:
    return list_key(job), job.job_id


def _conditions_hold(job: JobRecord, t: Transition) -> bool:
    return (
        job.status is t.source
        and (t.lease_token is None or job.lease_token == t.lease_token)
        and (not t.require_due or job.dispatch_at <= t.now)
        and (not t.require_lease_expired or job.lease_expires_at is None or job.lease_expires_at <= t.now)
        and (not t.count_attempt or job.stalls < job.max_attempts)
        and (not t.require_not_isolated or not job.isolated)
        and (t.require_redrive_count is None or job.redrive_count == t.require_redrive_count)
        # A capped job is claimed only with a slot, an uncapped one only without.
        and (t.new_lease is None or (t.slot is not None) == (job.max_running > 0))
    )


def _lifecycle_changes(job: JobRecord, t: Transition) -> dict[str, Any]:
    changes: dict[str, Any] = {"status": t.target, "updated_at": t.now}
    if t.count_attempt:
        changes.update(attempts=job.attempts + 1, stalls=job.stalls + 1, solo=t.solo)
    if t.renew_attempts:
        changes.update(
            attempts=0,
            stalls=0,
            crashes=0,
            isolated=False,
            solo=False,
            redrive_count=job.redrive_count + 1,
            error=None,
            result_location=None,
        )
    if t.operator_redrive:
        changes["budget"] = t.budget  # the new run's hold replaces the ended run's
    if not t.renew_attempts:
        changes.update(_lease_accounting(job, t))
    if t.new_lease is not None:
        changes.update(lease_token=t.new_lease.token, lease_expires_at=t.new_lease.expires_at)
    elif t.target not in _LEASE_STATUSES:
        changes.update(lease_token=None, lease_expires_at=None)
    return changes


def _lease_accounting(job: JobRecord, t: Transition) -> dict[str, Any]:
    """What an expired lease (shared.leases) or a deferral gives back or counts."""
    changes: dict[str, Any] = {}
    if t.isolate:
        changes["isolated"] = True
    if t.count_crash:
        changes["crashes"] = job.crashes + 1
    if t.refund_stall or t.refund_attempt:
        changes["stalls"] = job.stalls - 1
    if t.refund_attempt:
        changes["attempts"] = job.attempts - 1
    return changes


# Fields a transition sets when it names them (a capped claim's slot among them).
_SET_WHEN_GIVEN = (
    "slot",
    "dispatch_at",
    "cancel_requested_at",
    "error",
    "result_location",
    "result_body",
    "result_attempt",
    "input_location",
)


def _field_changes(job: JobRecord, t: Transition) -> dict[str, Any]:
    changes: dict[str, Any] = {
        name: getattr(t, name) for name in _SET_WHEN_GIVEN if getattr(t, name) is not None
    }
    changes.update(_usage_changes(job, t))
    if t.target in TERMINAL:
        changes["input_body"] = None
    # Any transition ends a wait on a provider batch; the fallback flag stays.
    changes.update(waiting_for=None, batch_id=None)
    if t.batch_fallback:
        changes["batch_fallback"] = True
    if t.batch_seen is not None:
        changes["batches_seen"] = job.batches_seen | {handed_back_marker(t.batch_seen)}
    return changes


def _usage_changes(job: JobRecord, t: Transition) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    if t.usage_total is not None:
        changes["usage"] = _sticky_estimate(job.usage, t.usage_total)
        if t.extra_usage is not None:
            changes["extra_usage"] = t.extra_usage
    elif t.usage is not None:
        # Tokens add up over attempts (the adapter uses ADD).
        before = job.usage or Usage(input_tokens=0, output_tokens=0)
        changes["usage"] = Usage(
            input_tokens=before.input_tokens + t.usage.input_tokens,
            output_tokens=before.output_tokens + t.usage.output_tokens,
            estimated=before.estimated or t.usage.estimated,
            cached_input_tokens=before.cached_input_tokens + t.usage.cached_input_tokens,
            tiers=before.tiers | t.usage.tiers,
        )
    if t.unkept_usage is not None:
        # Added to the usage and to the extra usage's counts (the adapter ADDs both).
        tokens = Usage(input_tokens=t.unkept_usage.input_tokens, output_tokens=t.unkept_usage.output_tokens)
        changes["usage"] = add_usage(job.usage, t.unkept_usage)
        changes["extra_usage"] = add_usage(job.extra_usage, tokens)
    if t.result_usage_counted:
        changes["result_usage_counted"] = True
    return changes


def _sticky_estimate(before: Usage | None, usage: Usage) -> Usage:
    """The adapter never removes `usageEstimated` or a tier of `usageTiers`: a usage keeps both."""
    if before is not None and before.tiers - usage.tiers:
        usage = usage.model_copy(update={"tiers": before.tiers | usage.tiers})
    if before is not None and before.estimated and not usage.estimated:
        return usage.model_copy(update={"estimated": True})
    return usage


class InMemoryPayloadStore:
    """PayloadStore in dictionaries keyed by (job id, location), like the item/S3 split of the adapter.

    Write-once like the adapter: a second put of a payload leaves the first one (and its expiry)
    as it was, and put_result hands back whichever result is stored.
    """

    def __init__(self) -> None:
        self.inputs: dict[tuple[str, BlobLocation], JobInput] = {}
        self.results: dict[tuple[str, BlobLocation], JobResult] = {}
        self.expires_at: dict[tuple[str, str, BlobLocation], datetime] = {}
        self.writes: list[str] = []

    def put_input(self, job_input: JobInput, location: BlobLocation, expires_at: datetime) -> None:
        """Store the input unless one is there (attribute_not_exists / If-None-Match)."""
        key = (job_input.job_id, location)
        if key in self.inputs:
            return
        self.inputs[key] = job_input
        self.expires_at[("input", job_input.job_id, location)] = expires_at
        self.writes.append("put_input")

    def get_input(self, job_id: str, location: BlobLocation) -> JobInput | None:
        """The input stored at that location, or None."""
        return self.inputs.get((job_id, location))

    def set_input_expiry(self, job_id: str, location: BlobLocation, at: datetime) -> None:
        """Schedule an input item's deletion; S3 inputs age out by the bucket lifecycle and inline
        ones with their job (no write)."""
        if location != "item" or (job_id, location) not in self.inputs:
            return
        self.expires_at[("input", job_id, location)] = at
        self.writes.append("set_input_expiry")

    def put_result(self, result: JobResult, location: BlobLocation, expires_at: datetime) -> JobResult:
        """Store the result unless one is there; the one stored comes back, read through
        get_result as the adapter reads it (a fault injected there reaches this path too)."""
        key = (result.job_id, location)
        if key in self.results:
            stored = self.get_result(result.job_id, location)
            if stored is None:  # pragma: no cover - as the adapter: a refused write means it exists
                raise StorageUnavailableError("The stored result is not readable right now.")
            return stored
        self.results[key] = result
        self.expires_at[("result", result.job_id, location)] = expires_at
        self.writes.append("put_result")
        return result

    def get_result(self, job_id: str, location: BlobLocation) -> JobResult | None:
        """The result stored at that location, or None."""
        return self.results.get((job_id, location))

    def find_result(self, job_id: str) -> tuple[BlobLocation, JobResult] | None:
        """The item location first, then S3, each through get_result, as the adapter reads them:
        a fault injected into get_result reaches the worker's adoption of an earlier result."""
        locations: tuple[BlobLocation, ...] = ("item", "s3")
        for location in locations:
            result = self.get_result(job_id, location)
            if result is not None:
                return location, result
        return None


class InMemoryStepStore:
    """StepStore in a dictionary, write-once like the adapter, expiry checked on read like it."""

    def __init__(self) -> None:
        self.steps: dict[tuple[str, str], StepOutput] = {}
        self.expires_at: dict[tuple[str, str], datetime] = {}
        self.writes: list[str] = []

    def put_step(self, step: StepOutput, expires_at: datetime) -> StepOutput:
        """`attribute_not_exists(pk)`: a second put hands back the first one."""
        key = (step.job_id, step.step_id)
        if key in self.steps:
            return self.steps[key]
        self.steps[key] = step
        self.expires_at[key] = expires_at
        self.writes.append("put_step")
        return step

    def get_steps(self, job_id: str, now: datetime) -> dict[str, StepOutput]:
        """The job's live checkpoints (`ttl > now`), by step id."""
        return {
            step_id: step
            for (owner, step_id), step in self.steps.items()
            if owner == job_id and self.expires_at[(owner, step_id)] > now
        }

    def set_steps_expiry(self, job_id: str, step_ids: list[str], at: datetime) -> None:
        """Moves the expiry of the checkpoints that exist."""
        for step_id in step_ids:
            if (job_id, step_id) in self.steps:
                self.expires_at[(job_id, step_id)] = at
                self.writes.append("set_steps_expiry")


def job_record(
    created_at: datetime,
    *,
    tenant: str = "user:alice",
    owner: str = "alice",
    status: JobStatus = JobStatus.PENDING,
    operation: Operation = Operation.SUMMARIZE,
    **overrides: Any,
) -> JobRecord:
    """A job as submit writes it (Pending, due at once, 30 days to live), with any field overridden."""
    fields: dict[str, Any] = {
        "job_id": new_job_id(),
        "tenant": tenant,
        "owner": owner,
        "status": status,
        "operation": operation,
        "created_at": created_at,
        "updated_at": created_at,
        "expires_at": created_at + timedelta(days=30),
        "sequence_id": new_sequence_id(),
        "model": "gpt-4o-mini",
        "prompt_version": f"{operation.value}-v1",
        "input_location": "item",
        "max_attempts": 3,
        "dispatch_at": created_at,
    }
    if "attempts" in overrides and "stalls" not in overrides:
        # A one-step job's claims so far are its stalls too, unless a test says otherwise.
        fields["stalls"] = overrides["attempts"]
    return JobRecord(**{**fields, **overrides})
