"""JobRepository on DynamoDB: one jobs table (stream on) and one idempotency table (no stream)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from shared import resources as r
from shared.adapters.due_index import query_due
from shared.adapters.dynamo_errors import error_code, storage_errors
from shared.adapters.dynamo_items import (
    BATCH_FALLBACK_ATTRIBUTE,
    BATCH_ID_ATTRIBUTE,
    BATCHES_SEEN_ATTRIBUTE,
    BUDGET_ATTRIBUTES,
    CACHED_INPUT_TOKENS_ATTRIBUTE,
    EXTRA_INPUT_TOKENS_ATTRIBUTE,
    EXTRA_OUTPUT_TOKENS_ATTRIBUTE,
    INPUT_BODY_ATTRIBUTE,
    LATE_TOKENS_ATTRIBUTE,
    MAX_RUNNING_ATTRIBUTE,
    OUTPUT_ATTEMPT_ATTRIBUTE,
    RESULT_ATTEMPT_ATTRIBUTE,
    RESULT_BODY_ATTRIBUTE,
    RESULT_USAGE_COUNTED_ATTRIBUTE,
    SLOT_ATTRIBUTE,
    USAGE_ESTIMATED_ATTRIBUTE,
    USAGE_TIERS_ATTRIBUTE,
    WAITING_FOR_ATTRIBUTE,
    budget_to_values,
    fits_in_job_item,
    idempotency_from_item,
    idempotency_key,
    idempotency_to_item,
    job_from_item,
    job_id_of,
    job_key,
    job_to_item,
    serialize,
    sweep_shard,
)
from shared.adapters.update_builder import UpdateBuilder
from shared.clock import epoch_seconds, to_iso
from shared.cursor import ListPosition
from shared.job import IdempotencyRecord, JobRecord, JobSummary, Usage, handed_back_marker, late_marker
from shared.lifecycle import TERMINAL, JobStatus, check_transition
from shared.ports import JobPageSlice, Lease, Transition, TransitionConflictError, WriteKind

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_CONDITION_FAILED = "ConditionalCheckFailedException"
_BATCH_GET_LIMIT = 100
_LEASE_STATUSES = frozenset({JobStatus.RUNNING, JobStatus.CANCELLATION_REQUESTED})
WAITING_FOR_BATCH = "provider_batch"


def _old_item(error: ClientError) -> dict[str, Any] | None:
    item: dict[str, Any] | None = error.response.get("Item")  # type: ignore[assignment]
    return item or None


class DynamoJobRepository:
    """Jobs, list and sweeper indexes, idempotency claims and submit-rate counters.

    Takes an injected low-level DynamoDB client (created once per container by the
    function's composition root), so the same class runs against AWS, moto and local mode.
    """

    def __init__(self, client: DynamoDBClient, jobs_table: str, idempotency_table: str) -> None:
        self._client = client
        self._jobs_table = jobs_table
        self._idempotency_table = idempotency_table

    def claim_idempotency_key(self, record: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
        """Write the claim unless a live one exists; the loser gets the winner's claim in the same call."""
        try:
            with storage_errors():
                self._client.put_item(
                    TableName=self._idempotency_table,
                    Item=idempotency_to_item(record),
                    # TTL deletes late, so an expired claim is treated as absent.
                    ConditionExpression="attribute_not_exists(#pk) OR #expiresAt < :now",
                    ExpressionAttributeNames={"#pk": r.IDEMPOTENCY_PARTITION_KEY, "#expiresAt": "expiresAt"},
                    ExpressionAttributeValues={":now": {"S": to_iso(now)}},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
        except ClientError as error:
            if error_code(error) != _CONDITION_FAILED:
                raise
            item = _old_item(error)
            if item is None:  # pragma: no cover - DynamoDB always returns ALL_OLD here
                raise
            return idempotency_from_item(item)
        return None

    def find_idempotency_claim(self, scope_hash: str, now: datetime) -> IdempotencyRecord | None:
        """The live claim, or None (TTL deletes late, so an expired claim is absent here too)."""
        with storage_errors():
            response = self._client.get_item(
                TableName=self._idempotency_table,
                Key=idempotency_key(scope_hash),
                ConsistentRead=True,
            )
        item = response.get("Item")
        if not item:
            return None
        record = idempotency_from_item(item)
        return None if record.expires_at < now else record

    def release_idempotency_claim(self, record: IdempotencyRecord) -> None:
        """One conditional DeleteItem: gone only while it still names this submit's job."""
        try:
            with storage_errors():
                self._client.delete_item(
                    TableName=self._idempotency_table,
                    Key=idempotency_key(record.scope_hash),
                    ConditionExpression="#jobId = :jobId",
                    ExpressionAttributeNames={"#jobId": "jobId"},
                    ExpressionAttributeValues={":jobId": {"S": record.job_id}},
                )
        except ClientError as error:
            # Already gone (TTL), or another submit's claim by now: nothing of ours is left.
            if error_code(error) != _CONDITION_FAILED:
                raise

    def fits_in_job_item(
        self, job: JobRecord, *, input_body: str | None = None, result_body: str | None = None
    ) -> bool:
        """The job item's size rules (shared.adapters.dynamo_items.fits_in_job_item)."""
        return fits_in_job_item(job, input_body=input_body, result_body=result_body)

    def create_job(self, job: JobRecord, sweep_at: datetime) -> bool:
        """Write the job item unless it exists; its INSERT on the stream is what starts the work."""
        try:
            with storage_errors():
                self._client.put_item(
                    TableName=self._jobs_table,
                    Item=job_to_item(job, sweep_at=sweep_at),
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": r.PARTITION_KEY},
                )
        except ClientError as error:
            if error_code(error) == _CONDITION_FAILED:
                return False
            raise
        return True

    def get_job(self, job_id: str) -> JobRecord | None:
        """The job, read strongly consistent: a stale 404 right after a 202 would be a bug."""
        with storage_errors():
            response = self._client.get_item(
                TableName=self._jobs_table, Key=job_key(job_id), ConsistentRead=True
            )
        item = response.get("Item")
        return job_from_item(item) if item else None

    def list_jobs(
        self, owner_key: str, status: JobStatus | None, limit: int, after: ListPosition | None, now: datetime
    ) -> JobPageSlice:
        """Newest first: `limit` unexpired entries of the owner's partition of the list index, then
        the jobs they name, read eventually consistent in one BatchGetItem and filtered by status.

        The index projects only what never changes, so no write after the submit costs an index
        write; a page can therefore come back short (or empty) while there is more, as a
        FilterExpression's page can.
        """
        arguments: dict[str, Any] = {
            "TableName": self._jobs_table,
            "IndexName": r.LIST_INDEX,
            "KeyConditionExpression": "#owner = :owner",
            "FilterExpression": "#expiresAt > :now",
            "ExpressionAttributeNames": {"#owner": r.LIST_INDEX_PARTITION, "#expiresAt": "expiresAt"},
            "ExpressionAttributeValues": serialize({":owner": owner_key, ":now": to_iso(now)}),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if after is not None:
            arguments["ExclusiveStartKey"] = serialize(
                {
                    r.LIST_INDEX_PARTITION: owner_key,
                    r.LIST_INDEX_SORT: after.list_key,
                    r.PARTITION_KEY: f"JOB#{after.job_id}",
                    r.SORT_KEY: "JOB",
                }
            )
        with storage_errors():
            response = self._client.query(**arguments)
        last = response.get("LastEvaluatedKey")
        next_position = (
            ListPosition(
                list_key=last[r.LIST_INDEX_SORT]["S"],
                job_id=last[r.PARTITION_KEY]["S"].removeprefix("JOB#"),
            )
            if last
            else None
        )
        found = [item[r.PARTITION_KEY]["S"].removeprefix("JOB#") for item in response.get("Items", [])]
        jobs = self._read_jobs(found)
        items: list[JobSummary] = [
            job
            for job in (jobs.get(job_id) for job_id in found)
            if job is not None and (status is None or job.status is status)
        ]
        return JobPageSlice(items=items, next_position=next_position)

    def _read_jobs(self, job_ids: list[str]) -> dict[str, JobRecord]:
        """The jobs, by id, in BatchGetItems of at most 100 keys (eventually consistent: the list may
        lag a write by a moment, single-job reads never do); a job gone meanwhile is left out."""
        jobs: dict[str, JobRecord] = {}
        for start in range(0, len(job_ids), _BATCH_GET_LIMIT):
            keys = [job_key(job_id) for job_id in job_ids[start : start + _BATCH_GET_LIMIT]]
            request: Any = {self._jobs_table: {"Keys": keys}}
            while request:
                with storage_errors():
                    response = self._client.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._jobs_table, []):
                    job = job_from_item(item)
                    jobs[job.job_id] = job
                request = response.get("UnprocessedKeys") or None
        return jobs

    def transition(self, transition: Transition) -> JobRecord:
        """One conditional UpdateItem: the lifecycle edge, the lease, and the index keys together."""
        check_transition(transition.source, transition.target, operator_redrive=transition.operator_redrive)
        return self._conditional_update(transition.job_id, _transition_update(transition), transition.kind)

    def take_submit_quota(self, owner_key: str, window_start: datetime, limit: int) -> bool:
        """One conditional ADD on the owner's counter for this minute; the item expires by TTL."""
        try:
            with storage_errors():
                self._client.update_item(
                    TableName=self._idempotency_table,
                    Key={r.IDEMPOTENCY_PARTITION_KEY: {"S": f"RATE#{owner_key}#{to_iso(window_start)}"}},
                    UpdateExpression="ADD #count :one SET #ttl = if_not_exists(#ttl, :ttl)",
                    ConditionExpression="attribute_not_exists(#count) OR #count < :limit",
                    ExpressionAttributeNames={"#count": "submits", "#ttl": r.TTL_ATTRIBUTE},
                    ExpressionAttributeValues=serialize(
                        {":one": 1, ":limit": limit, ":ttl": epoch_seconds(window_start) + 120}
                    ),
                )
        except ClientError as error:
            if error_code(error) == _CONDITION_FAILED:
                return False
            raise
        return True

    def heartbeat(self, job_id: str, lease: Lease) -> JobRecord:
        """Extend the lease while the holder still has it; the index keys are left alone."""
        return self._conditional_update(job_id, _held(lease), WriteKind.HEARTBEAT)

    def hold_for_batch(self, job_id: str, hold: Lease) -> JobRecord:
        """A heartbeat that also sets `waitingFor` (a progress write: pushes show the wait). The
        claim's `slot` goes: the claim ends here and frees its slot, and a job waiting on a batch
        holds none (DESIGN.md, "Fairness between tenants"); the next claim records its own."""
        update = _held(hold)
        update.set(WAITING_FOR_ATTRIBUTE, WAITING_FOR_BATCH)
        update.remove(SLOT_ATTRIBUTE)
        return self._conditional_update(job_id, update, WriteKind.PROGRESS)

    def record_batch(self, job_id: str, hold_token: str, batch_id: str) -> JobRecord:
        """`leaseToken = :hold AND status IN (Running, CancellationRequested)`; sets batchId."""
        update = UpdateBuilder()
        status = update.name("status")
        running = update.value(JobStatus.RUNNING.value)
        requested = update.value(JobStatus.CANCELLATION_REQUESTED.value)
        update.require(f"{status} IN ({running}, {requested})")
        update.require(f"{update.name('leaseToken')} = {update.value(hold_token)}")
        update.set(BATCH_ID_ATTRIBUTE, batch_id)
        return self._conditional_update(job_id, update, WriteKind.HEARTBEAT)

    def count_late_usage(self, job_id: str, batch_id: str, usage: Usage) -> JobRecord | None:
        """`status IN (terminal) AND NOT contains(batchesSeen, back|late)`: ADD the tokens (to the
        usage, to `lateTokens` and to the extra usage) and the late marker in one write (`w` =
        heartbeat: no status changes; the notifier settles nothing twice, the reservation being its
        marker). On a failed condition the old item tells an earlier count (returned) from a batch
        that is not late for the job (None).

        `lateTokens` is what a run's settlement leaves out (the poller settles it apart); the extra
        usage (calls whose answers are no checkpoint's) keeps the tokens in a multi-step job's usage
        when a redriven run re-sums it from its checkpoints (a one-step job's usage only adds up)."""
        update = UpdateBuilder()
        status = update.name("status")
        ended = ", ".join(update.value(state.value) for state in sorted(TERMINAL))
        seen = update.name(BATCHES_SEEN_ATTRIBUTE)
        late = late_marker(batch_id)
        update.require(f"{status} IN ({ended})")
        update.require(f"NOT contains({seen}, {update.value(handed_back_marker(batch_id))})")
        update.require(f"NOT contains({seen}, {update.value(late)})")
        _add_usage(update, usage)
        update.add(LATE_TOKENS_ATTRIBUTE, usage.input_tokens + usage.output_tokens)
        update.add(EXTRA_INPUT_TOKENS_ATTRIBUTE, usage.input_tokens)
        update.add(EXTRA_OUTPUT_TOKENS_ATTRIBUTE, usage.output_tokens)
        update.add_to_set(BATCHES_SEEN_ATTRIBUTE, {late})
        try:
            return self._conditional_update(job_id, update, WriteKind.HEARTBEAT)
        except TransitionConflictError as conflict:
            current = conflict.current
            return current if current is not None and late in current.batches_seen else None

    def take_output_attempt(self, job_id: str, lease: Lease) -> JobRecord:
        """A heartbeat with `ADD outputAttempt 1`: one write, no index key, `w` = heartbeat."""
        update = _held(lease)
        update.add(OUTPUT_ATTEMPT_ATTRIBUTE, 1)
        return self._conditional_update(job_id, update, WriteKind.HEARTBEAT)

    def record_progress(
        self,
        job_id: str,
        lease: Lease,
        completed_steps: int,
        usage: Usage | None,
        extra_usage: Usage | None,
    ) -> JobRecord:
        """A heartbeat that also says how far the job is: no index key changes, so no index write."""
        update = _held(lease)
        update.set("completedSteps", completed_steps).set("stalls", 0)
        _set_usage(update, usage, extra_usage)
        return self._conditional_update(job_id, update, WriteKind.PROGRESS)

    def bump_dispatch(self, job: JobRecord, now: datetime, sweep_at: datetime) -> JobRecord:
        """Pending stays Pending; the compare on dispatchAt makes this the one re-send of the period."""
        update = UpdateBuilder()
        update.require(f"{update.name('status')} = {update.value(JobStatus.PENDING.value)}")
        update.require(f"{update.name('dispatchAt')} = {update.value(to_iso(job.dispatch_at))}")
        update.set("dispatchAt", to_iso(now)).set("updatedAt", to_iso(now))
        update.set(r.SWEEP_INDEX_PARTITION, sweep_shard(job.job_id)).set(r.SWEEP_INDEX_SORT, to_iso(sweep_at))
        return self._conditional_update(job.job_id, update, WriteKind.BUMP)

    def defer_sweep(self, job: JobRecord, sweep_at: datetime) -> None:
        """Move a watched job's sweepAt later, if it has not changed status or lease since it was read."""
        update = UpdateBuilder()
        update.require(f"{update.name('status')} = {update.value(job.status.value)}")
        if job.lease_token is not None:
            update.require(f"{update.name('leaseToken')} = {update.value(job.lease_token)}")
        update.set(r.SWEEP_INDEX_SORT, to_iso(sweep_at))
        self._conditional_update(job.job_id, update, WriteKind.DEFER)

    def sweep_candidates(self, shard: str, due_by: datetime, limit: int) -> list[str]:
        """One query on the sparse sweeper index: only watched jobs carry its keys, so no scan."""
        items = query_due(
            self._client,
            table=self._jobs_table,
            index=r.SWEEP_INDEX,
            partition=r.SWEEP_INDEX_PARTITION,
            sort=r.SWEEP_INDEX_SORT,
            shard=shard,
            due_by=due_by,
            limit=limit,
        )
        return [job_id_of(item) for item in items]

    def _conditional_update(self, job_id: str, update: UpdateBuilder, kind: WriteKind) -> JobRecord:
        # Every job write says what it was and counts itself: the stream's consumers read both.
        update.set(r.WRITE_KIND_ATTRIBUTE, kind.value).add(r.REVISION_ATTRIBUTE, 1)
        try:
            with storage_errors():
                response = self._client.update_item(
                    TableName=self._jobs_table,
                    Key=job_key(job_id),
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **update.request(),
                )
        except ClientError as error:
            if error_code(error) != _CONDITION_FAILED:
                raise
            old = _old_item(error)
            raise TransitionConflictError(job_from_item(old) if old else None) from None
        return job_from_item(response["Attributes"])


def _held(lease: Lease) -> UpdateBuilder:
    """An update of a job its holder still has (Running or CancellationRequested, this lease's
    token) that moves the lease's expiry on."""
    update = UpdateBuilder()
    status = update.name("status")
    running = update.value(JobStatus.RUNNING.value)
    requested = update.value(JobStatus.CANCELLATION_REQUESTED.value)
    update.require(f"{status} IN ({running}, {requested})")
    update.require(f"{update.name('leaseToken')} = {update.value(lease.token)}")
    update.set("leaseExpiresAt", to_iso(lease.expires_at))
    return update


def _transition_update(t: Transition) -> UpdateBuilder:
    update = UpdateBuilder()
    status = update.name("status")
    update.require(f"{status} = {update.value(t.source.value)}")
    update.set("status", t.target.value).set("updatedAt", to_iso(t.now))
    if t.lease_token is not None:
        update.require(f"{update.name('leaseToken')} = {update.value(t.lease_token)}")
    if t.require_due:
        update.require(f"{update.name('dispatchAt')} <= {update.value(to_iso(t.now))}")
    if t.require_lease_expired:
        lease_expires = update.name("leaseExpiresAt")
        update.require(
            f"attribute_not_exists({lease_expires}) OR {lease_expires} <= {update.value(to_iso(t.now))}"
        )
    if t.count_attempt:
        _count_claim(update, t)
    if t.renew_attempts:
        _renew(update)
    else:
        _lease_accounting(update, t)
    if t.operator_redrive:
        _new_run_budget(update, t)
    if t.new_lease is not None:
        update.set("leaseToken", t.new_lease.token).set("leaseExpiresAt", to_iso(t.new_lease.expires_at))
        _claim_slot(update, t)
    elif t.target not in _LEASE_STATUSES:
        update.remove("leaseToken", "leaseExpiresAt")
    _set_index_and_fields(update, t)
    _end_batch_wait(update, t)
    return update


def _end_batch_wait(update: UpdateBuilder, t: Transition) -> None:
    """Any transition ends a wait on a provider batch (a claim starts afresh; the poller hands back)."""
    update.remove(WAITING_FOR_ATTRIBUTE, BATCH_ID_ATTRIBUTE)
    if t.batch_fallback:
        update.set(BATCH_FALLBACK_ATTRIBUTE, True)
    if t.batch_seen is not None:
        update.add_to_set(BATCHES_SEEN_ATTRIBUTE, {handed_back_marker(t.batch_seen)})


def _count_claim(update: UpdateBuilder, t: Transition) -> None:
    """attempts + 1 and stalls + 1 while stalls < maxAttempts."""
    attempts, stalls = update.name("attempts"), update.name("stalls")
    update.require(f"attribute_not_exists({stalls}) OR {stalls} < {update.name('maxAttempts')}")
    # Both are absent until the first claim (the submit writes no zeros: every byte is billed).
    update.set_expression("attempts", f"if_not_exists({attempts}, {update.value(0)}) + {update.value(1)}")
    update.set_expression("stalls", f"if_not_exists({stalls}, {update.value(0)}) + {update.value(1)}")
    if t.solo:
        update.set("solo", True)
    else:
        update.remove("solo")
    if t.require_not_isolated:
        update.require(f"attribute_not_exists({update.name('isolated')})")


def _claim_slot(update: UpdateBuilder, t: Transition) -> None:
    """A capped job (maxRunning set at submit) is claimed only with a running slot in hand, and
    records which; an uncapped one only without (DESIGN.md, "Fairness between tenants")."""
    max_running = update.name(MAX_RUNNING_ATTRIBUTE)
    if t.slot is None:
        update.require(f"attribute_not_exists({max_running})")
    else:
        update.require(f"attribute_exists({max_running})")
        update.set(SLOT_ATTRIBUTE, t.slot)


def _renew(update: UpdateBuilder) -> None:
    """An operator redrive starts the job over: its budgets, its crash record and its isolation."""
    update.set("attempts", 0).set("stalls", 0).set("crashes", 0).set_expression(
        "redriveCount",
        f"if_not_exists({update.name('redriveCount')}, {update.value(0)}) + {update.value(1)}",
    )
    update.remove("errorCode", "errorMessage", "resultLocation", "isolated", "solo")


def _new_run_budget(update: UpdateBuilder, t: Transition) -> None:
    """The redriven run's budget hold replaces the ended run's (which was settled before), only
    while the job is still in the run the hold's reservation was made after."""
    if t.require_redrive_count is not None:
        redrives = update.name("redriveCount")
        same = f"{redrives} = {update.value(t.require_redrive_count)}"
        update.require(
            f"attribute_not_exists({redrives}) OR {same}" if t.require_redrive_count == 0 else same
        )
    values = budget_to_values(t.budget)
    for attribute in BUDGET_ATTRIBUTES:
        if values.get(attribute) is not None:
            update.set(attribute, values[attribute])
        else:
            update.remove(attribute)


def _lease_accounting(update: UpdateBuilder, t: Transition) -> None:
    """What an expired lease changes (shared.leases)."""
    if t.isolate:
        update.set("isolated", True)
    if t.count_crash:
        update.add("crashes", 1)
    if t.refund_stall or t.refund_attempt:
        # Only the sweeper and a deferral refund, under the lease of a claim that counted one, so
        # stalls (and attempts) are at least 1 here.
        stalls = update.name("stalls")
        update.set_expression("stalls", f"{stalls} - {update.value(1)}")
    if t.refund_attempt:
        attempts = update.name("attempts")
        update.set_expression("attempts", f"{attempts} - {update.value(1)}")


def _set_index_and_fields(update: UpdateBuilder, t: Transition) -> None:
    if t.target in TERMINAL:
        # An input carried in the job item ends with the job (a Failed one was copied out first).
        update.remove(r.SWEEP_INDEX_PARTITION, r.SWEEP_INDEX_SORT, INPUT_BODY_ATTRIBUTE)
    elif t.sweep_at is not None:
        update.set(r.SWEEP_INDEX_PARTITION, sweep_shard(t.job_id)).set(r.SWEEP_INDEX_SORT, to_iso(t.sweep_at))
    if t.error is not None:
        update.set("errorCode", t.error.code).set("errorMessage", t.error.message)
    if t.usage_total is not None:
        _set_usage(update, t.usage_total, t.extra_usage)
    elif t.usage is not None:
        _add_usage(update, t.usage)
    if t.unkept_usage is not None:
        _add_usage(update, t.unkept_usage)
        update.add(EXTRA_INPUT_TOKENS_ATTRIBUTE, t.unkept_usage.input_tokens)
        update.add(EXTRA_OUTPUT_TOKENS_ATTRIBUTE, t.unkept_usage.output_tokens)
    if t.result_usage_counted:
        update.set(RESULT_USAGE_COUNTED_ATTRIBUTE, True)
    optional = {
        "dispatchAt": to_iso(t.dispatch_at) if t.dispatch_at is not None else None,
        "cancelRequestedAt": to_iso(t.cancel_requested_at) if t.cancel_requested_at is not None else None,
        "resultLocation": t.result_location,
        RESULT_BODY_ATTRIBUTE: t.result_body,
        RESULT_ATTEMPT_ATTRIBUTE: t.result_attempt,
        "inputLocation": t.input_location,
    }
    for attribute, value in optional.items():
        if value is not None:
            update.set(attribute, value)


def _add_usage(update: UpdateBuilder, usage: Usage) -> None:
    """Tokens add up over attempts: a retried call costs again, and the job says so."""
    update.add("inputTokens", usage.input_tokens).add("outputTokens", usage.output_tokens)
    if usage.estimated:
        update.set(USAGE_ESTIMATED_ATTRIBUTE, True)
    if usage.cached_input_tokens:
        update.add(CACHED_INPUT_TOKENS_ATTRIBUTE, usage.cached_input_tokens)
    update.add_to_set(USAGE_TIERS_ATTRIBUTE, {tier.value for tier in usage.tiers})


def _set_usage(update: UpdateBuilder, usage: Usage | None, extra_usage: Usage | None) -> None:
    """A multi-step job's usage, replaced: the checkpoints' sum plus the extra calls' (also kept)."""
    if usage is not None:
        update.set("inputTokens", usage.input_tokens).set("outputTokens", usage.output_tokens)
        if usage.estimated:  # sticky: a sum that once held an estimate still does
            update.set(USAGE_ESTIMATED_ATTRIBUTE, True)
        if usage.cached_input_tokens:
            update.set(CACHED_INPUT_TOKENS_ATTRIBUTE, usage.cached_input_tokens)
        # Sticky like the estimate flag: a tier once used stays among the job's tiers.
        update.add_to_set(USAGE_TIERS_ATTRIBUTE, {tier.value for tier in usage.tiers})
    if extra_usage is not None:
        update.set(EXTRA_INPUT_TOKENS_ATTRIBUTE, extra_usage.input_tokens)
        update.set(EXTRA_OUTPUT_TOKENS_ATTRIBUTE, extra_usage.output_tokens)
