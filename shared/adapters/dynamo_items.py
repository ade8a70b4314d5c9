"""The mapping between domain records and DynamoDB items (low-level attribute-value form)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from shared import resources as r
from shared.adapters.item_size import item_size
from shared.clock import epoch_seconds, from_iso, to_iso
from shared.contract import Operation
from shared.job import BudgetHold, IdempotencyRecord, JobError, JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.plan_parameters import PlanParameters
from shared.tiers import Tier

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

JOB_SORT_VALUE = "JOB"
INPUT_BODY_ATTRIBUTE = "input"
RESULT_BODY_ATTRIBUTE = "result"
# JobRecord.extra_usage and JobRecord.result_usage_counted: absent on almost every job.
EXTRA_INPUT_TOKENS_ATTRIBUTE = "extraInputTokens"
EXTRA_OUTPUT_TOKENS_ATTRIBUTE = "extraOutputTokens"
RESULT_USAGE_COUNTED_ATTRIBUTE = "resultUsageCounted"
# Streaming output (DESIGN.md, "Streaming output"): set only on jobs that stream, so the others
# pay no byte for them. `usageEstimated` sticks once any counted call was estimated.
STREAM_ATTRIBUTE = "stream"
OUTPUT_ATTEMPT_ATTRIBUTE = "outputAttempt"
RESULT_ATTEMPT_ATTRIBUTE = "resultAttempt"
# A job on a document: its id and the SHA-256 of the text the submit read (the notifier unpins
# the document from the terminal write's stream record, which carries both).
DOCUMENT_ID_ATTRIBUTE = "documentId"
DOCUMENT_SHA256_ATTRIBUTE = "documentSha256"
USAGE_ESTIMATED_ATTRIBUTE = "usageEstimated"
# Fairness: the tenant's running cap copied at submit, and the slot a capped claim holds.
MAX_RUNNING_ATTRIBUTE = "maxRunning"
SLOT_ATTRIBUTE = "slot"
CACHED_INPUT_TOKENS_ATTRIBUTE = "cachedInputTokens"  # absent while 0
USAGE_TIERS_ATTRIBUTE = "usageTiers"  # a string set of the tiers counted calls ran at
TIER_ATTRIBUTE = "tier"  # JobRecord.tier: absent for standard, the default
# A batch job's wait on the provider (DESIGN.md, "Cost tiers"): set while its calls are in a batch,
# removed by the next transition; the fallback flag stays once a batch of it expired or failed.
WAITING_FOR_ATTRIBUTE = "waitingFor"
BATCH_ID_ATTRIBUTE = "batchId"
BATCH_FALLBACK_ATTRIBUTE = "batchFallback"
BATCHES_SEEN_ATTRIBUTE = "batchesSeen"  # JobRecord.batches_seen: a string set, absent while empty
LATE_TOKENS_ATTRIBUTE = "lateTokens"  # JobRecord.late_tokens: absent while 0
JOB_ITEM_LIMIT_BYTES = 1024  # one write unit
_LARGEST_USAGE = Usage(
    input_tokens=9_999_999,
    output_tokens=9_999_999,
    cached_input_tokens=9_999_999,
    tiers=frozenset({Tier.STANDARD, Tier.FLEX}),
)
INPUT_SORT_VALUE = "INPUT"
RESULT_SORT_VALUE = "RESULT"


def job_pk(job_id: str) -> str:
    """The partition holding a job, its input and its result."""
    return f"JOB#{job_id}"


def job_id_of(item: Mapping[str, Any]) -> str:
    """The job id of a raw item of a job's partition: its key, the one place the id is stored."""
    return str(item[r.PARTITION_KEY]["S"]).removeprefix("JOB#")


def job_key(job_id: str) -> dict[str, Any]:
    """The primary key of a job item, in attribute-value form."""
    return {r.PARTITION_KEY: {"S": job_pk(job_id)}, r.SORT_KEY: {"S": JOB_SORT_VALUE}}


def sweep_shard(job_id: str) -> str:
    """The sweeper-index partition of a job: a stable hash, so a burst spreads over all shards."""
    return str(int(hashlib.sha256(job_id.encode()).hexdigest()[:8], 16) % r.SWEEP_SHARDS)


def list_key(created_at: datetime, sequence_id: str) -> str:
    """The list-index sort key: submission time, ties broken by the time-ordered sequence id."""
    return f"{to_iso(created_at)}#{sequence_id}"


def serialize(values: Mapping[str, Any]) -> dict[str, Any]:
    """Python values to attribute values, leaving out Nones (absent, not NULL)."""
    return {key: _serializer.serialize(value) for key, value in values.items() if value is not None}


def deserialize(item: Mapping[str, Any]) -> dict[str, Any]:
    """Attribute values to Python values; numbers come back as int."""
    plain = {key: _deserializer.deserialize(value) for key, value in item.items()}
    return {key: int(value) if isinstance(value, Decimal) else value for key, value in plain.items()}


def _optional_iso(value: datetime | None) -> str | None:
    return to_iso(value) if value is not None else None


def _optional_time(value: Any) -> datetime | None:
    return from_iso(value) if isinstance(value, str) else None


def job_to_item(job: JobRecord, sweep_at: datetime | None) -> dict[str, Any]:
    """A new job item, its list-index keys and (while watched) its sweeper-index keys."""
    values: dict[str, Any] = {
        r.PARTITION_KEY: job_pk(job.job_id),
        r.SORT_KEY: JOB_SORT_VALUE,
        r.TYPE_ATTRIBUTE: r.JOB_ITEM_TYPE,
        # Every byte here is paid for again at each write of the job, so nothing is stored
        # twice: the job id is in the key, the submission time and sequence id are the list key
        # (createdAt#sequenceId), and the owner is the list index's partition key (tenant and
        # sub never hold '#', shared.identity, so it splits back into both).
        r.LIST_INDEX_PARTITION: job.owner_key,
        r.LIST_INDEX_SORT: list_key(job.created_at, job.sequence_id),
        "operation": job.operation.value,
        "status": job.status.value,
        "updatedAt": to_iso(job.updated_at),
        "expiresAt": to_iso(job.expires_at),
        r.TTL_ATTRIBUTE: epoch_seconds(job.expires_at),
        "attempts": job.attempts or None,
        "maxAttempts": job.max_attempts,
        "model": job.model,
        "promptVersion": job.prompt_version,
        "inputLocation": job.input_location,
        "dispatchAt": to_iso(job.dispatch_at),
        "redriveCount": job.redrive_count or None,
        "cancelRequestedAt": _optional_iso(job.cancel_requested_at),
        "leaseToken": job.lease_token,
        "leaseExpiresAt": _optional_iso(job.lease_expires_at),
        "resultLocation": job.result_location,
        # A new item is the first write: revision 1, written by the submit.
        r.REVISION_ATTRIBUTE: job.revision,
        r.WRITE_KIND_ATTRIBUTE: "submit",
        # Absent until they matter: every byte of the item is paid for again on each write.
        "stalls": job.stalls or None,
        "crashes": job.crashes or None,
        "completedSteps": job.completed_steps or None,
        "totalSteps": job.total_steps if job.total_steps != 1 else None,
        # A small input rides in the job item (it stays within one write unit: fits_in_job_item)
        # until the job ends; a small result from the terminal write on.
        INPUT_BODY_ATTRIBUTE: job.input_body,
        RESULT_BODY_ATTRIBUTE: job.result_body,
        **plan_to_values(job.plan),
        "solo": True if job.solo else None,
        "isolated": True if job.isolated else None,
        RESULT_USAGE_COUNTED_ATTRIBUTE: True if job.result_usage_counted else None,
        STREAM_ATTRIBUTE: True if job.stream else None,
        OUTPUT_ATTEMPT_ATTRIBUTE: job.output_attempt or None,
        RESULT_ATTEMPT_ATTRIBUTE: job.result_attempt,
        DOCUMENT_ID_ATTRIBUTE: job.document_id,
        DOCUMENT_SHA256_ATTRIBUTE: job.document_sha256,
        MAX_RUNNING_ATTRIBUTE: job.max_running or None,
        SLOT_ATTRIBUTE: job.slot,
        TIER_ATTRIBUTE: job.tier.value if job.tier is not Tier.STANDARD else None,
        BATCHES_SEEN_ATTRIBUTE: set(job.batches_seen) or None,
        LATE_TOKENS_ATTRIBUTE: job.late_tokens or None,
    }
    if job.error is not None:
        values.update(errorCode=job.error.code, errorMessage=job.error.message)
    if job.usage is not None:
        values.update(inputTokens=job.usage.input_tokens, outputTokens=job.usage.output_tokens)
        values[USAGE_ESTIMATED_ATTRIBUTE] = True if job.usage.estimated else None
        values[CACHED_INPUT_TOKENS_ATTRIBUTE] = job.usage.cached_input_tokens or None
        values[USAGE_TIERS_ATTRIBUTE] = {tier.value for tier in job.usage.tiers} or None
    if job.extra_usage is not None:
        values[EXTRA_INPUT_TOKENS_ATTRIBUTE] = job.extra_usage.input_tokens
        values[EXTRA_OUTPUT_TOKENS_ATTRIBUTE] = job.extra_usage.output_tokens
    values.update(budget_to_values(job.budget))
    if sweep_at is not None:
        values.update(
            {r.SWEEP_INDEX_PARTITION: sweep_shard(job.job_id), r.SWEEP_INDEX_SORT: to_iso(sweep_at)}
        )
    return serialize(values)


def _summary_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    error = (
        JobError(code=values["errorCode"], message=values.get("errorMessage", ""))
        if "errorCode" in values
        else None
    )
    usage = (
        Usage(
            input_tokens=values["inputTokens"],
            output_tokens=values.get("outputTokens", 0),
            estimated=bool(values.get(USAGE_ESTIMATED_ATTRIBUTE, False)),
            cached_input_tokens=values.get(CACHED_INPUT_TOKENS_ATTRIBUTE, 0),
            tiers=frozenset(Tier(tier) for tier in values.get(USAGE_TIERS_ATTRIBUTE, ())),
        )
        if "inputTokens" in values
        else None
    )
    created_at, _, _ = str(values[r.LIST_INDEX_SORT]).partition("#")
    return {
        "job_id": str(values[r.PARTITION_KEY]).removeprefix("JOB#"),
        "status": JobStatus(values["status"]),
        "operation": Operation(values["operation"]),
        "created_at": from_iso(created_at),
        "updated_at": from_iso(values["updatedAt"]),
        "expires_at": from_iso(values["expiresAt"]),
        "attempts": values.get("attempts", 0),
        "crashes": values.get("crashes", 0),
        "completed_steps": values.get("completedSteps", 0),
        "total_steps": values.get("totalSteps", 1),
        "revision": values.get(r.REVISION_ATTRIBUTE, 0),
        "cancel_requested_at": _optional_time(values.get("cancelRequestedAt")),
        "error": error,
        "usage": usage,
        "budget": budget_from_values(values),
        "stream": bool(values.get(STREAM_ATTRIBUTE, False)),
        "waiting_for": values.get(WAITING_FOR_ATTRIBUTE),
    }


def job_from_item(item: Mapping[str, Any]) -> JobRecord:
    """A full job item as a JobRecord."""
    values = deserialize(item)
    tenant, _, owner = str(values[r.LIST_INDEX_PARTITION]).partition("#")
    return JobRecord(
        **_summary_fields(values),
        tenant=tenant,
        owner=owner,
        sequence_id=str(values[r.LIST_INDEX_SORT]).partition("#")[2],
        model=values["model"],
        prompt_version=values["promptVersion"],
        input_location=values["inputLocation"],
        max_attempts=values["maxAttempts"],
        dispatch_at=from_iso(values["dispatchAt"]),
        lease_token=values.get("leaseToken"),
        lease_expires_at=_optional_time(values.get("leaseExpiresAt")),
        redrive_count=values.get("redriveCount", 0),
        result_location=values.get("resultLocation"),
        stalls=values.get("stalls", 0),
        plan=plan_from_values(values),
        solo=bool(values.get("solo", False)),
        isolated=bool(values.get("isolated", False)),
        input_body=values.get(INPUT_BODY_ATTRIBUTE),
        result_body=values.get(RESULT_BODY_ATTRIBUTE),
        extra_usage=(
            Usage(
                input_tokens=values[EXTRA_INPUT_TOKENS_ATTRIBUTE],
                output_tokens=values.get(EXTRA_OUTPUT_TOKENS_ATTRIBUTE, 0),
            )
            if EXTRA_INPUT_TOKENS_ATTRIBUTE in values
            else None
        ),
        result_usage_counted=bool(values.get(RESULT_USAGE_COUNTED_ATTRIBUTE, False)),
        output_attempt=values.get(OUTPUT_ATTEMPT_ATTRIBUTE, 0),
        result_attempt=values.get(RESULT_ATTEMPT_ATTRIBUTE),
        document_id=values.get(DOCUMENT_ID_ATTRIBUTE),
        document_sha256=values.get(DOCUMENT_SHA256_ATTRIBUTE),
        max_running=values.get(MAX_RUNNING_ATTRIBUTE, 0),
        slot=values.get(SLOT_ATTRIBUTE),
        tier=Tier(values.get(TIER_ATTRIBUTE, Tier.STANDARD.value)),
        batch_id=values.get(BATCH_ID_ATTRIBUTE),
        batch_fallback=bool(values.get(BATCH_FALLBACK_ATTRIBUTE, False)),
        batches_seen=frozenset(values.get(BATCHES_SEEN_ATTRIBUTE, ())),
        late_tokens=values.get(LATE_TOKENS_ATTRIBUTE, 0),
    )


def fits_in_job_item(
    job: JobRecord, *, input_body: str | None = None, result_body: str | None = None
) -> bool:
    """True when the job item holding this payload stays within one write unit at the largest it
    grows while holding it (DESIGN.md, "Cost discipline": every write is billed on the whole item).

    An input is held from the submit to the terminal write, through claims with their lease,
    retries, a crash count, a cancel request and progress; a result from the terminal write on,
    when the lease is gone and the usage is known.
    """
    # Only a streamed call's usage can be an estimate.
    usage = _LARGEST_USAGE.model_copy(update={"estimated": job.stream})
    if input_body is not None:
        grown = job.model_copy(
            update={
                "input_body": input_body,
                "lease_token": "f" * 32,
                "lease_expires_at": job.expires_at,
                "cancel_requested_at": job.expires_at,
                "attempts": 99,
                "stalls": 99,
                "crashes": 9,
                "solo": True,
                "isolated": True,
                "redrive_count": 99,
                "revision": 99_999,
                "completed_steps": 9_999,
                "usage": usage,
                "output_attempt": 999 if job.stream else 0,
                "slot": 9_999 if job.max_running else None,
            }
        )
    else:
        grown = job.model_copy(
            update={
                "input_body": None,
                "result_body": result_body,
                "result_location": "job",
                "lease_token": None,
                "lease_expires_at": None,
                "usage": usage,
                "revision": max(job.revision, 99_999),
                "output_attempt": 999 if job.stream else 0,
                "result_attempt": 999 if job.stream else None,
            }
        )
    # The kind of write (`w`) and the sweeper keys the submit writes count too.
    size = item_size(job_to_item(grown, sweep_at=grown.expires_at)) + len("terminal")
    return size <= JOB_ITEM_LIMIT_BYTES


def idempotency_key(scope_hash: str) -> dict[str, Any]:
    """The key of a caller-and-key scope's idempotency claim."""
    return {r.IDEMPOTENCY_PARTITION_KEY: {"S": f"IDEM#{scope_hash}"}}


def idempotency_to_item(record: IdempotencyRecord) -> dict[str, Any]:
    """The idempotency claim item; its TTL is its own expiry (24 h), never the job's."""
    return serialize(
        {
            r.IDEMPOTENCY_PARTITION_KEY: f"IDEM#{record.scope_hash}",
            "fingerprint": record.fingerprint,
            "jobId": record.job_id,
            "createdAt": to_iso(record.created_at),
            "expiresAt": to_iso(record.expires_at),
            r.TTL_ATTRIBUTE: epoch_seconds(record.expires_at),
            "sequenceId": record.sequence_id,
            "model": record.model,
            "promptVersion": record.prompt_version,
            "maxAttempts": record.max_attempts,
            "jobExpiresAt": to_iso(record.job_expires_at),
            **plan_to_values(record.plan),
        }
    )


def idempotency_from_item(item: Mapping[str, Any]) -> IdempotencyRecord:
    """An idempotency claim item as a record."""
    values = deserialize(item)
    return IdempotencyRecord(
        scope_hash=str(values[r.IDEMPOTENCY_PARTITION_KEY]).removeprefix("IDEM#"),
        fingerprint=values["fingerprint"],
        job_id=values["jobId"],
        created_at=from_iso(values["createdAt"]),
        expires_at=from_iso(values["expiresAt"]),
        sequence_id=values["sequenceId"],
        model=values["model"],
        prompt_version=values["promptVersion"],
        max_attempts=values["maxAttempts"],
        job_expires_at=from_iso(values["jobExpiresAt"]),
        plan=plan_from_values(values),
    )


def budget_to_values(hold: BudgetHold | None) -> dict[str, Any]:
    """A run's budget hold as job attributes (none for a tenant without a limit; zeros left out)."""
    if hold is None:
        return {}
    return {
        "budgetPeriod": hold.period,
        "budgetTokens": hold.tokens,
        "budgetBase": hold.base_tokens or None,
        "budgetRun": hold.run or None,
    }


# Every attribute of a budget hold: an operator redrive that reserves nothing removes them all.
BUDGET_ATTRIBUTES = ("budgetPeriod", "budgetTokens", "budgetBase", "budgetRun")


def budget_from_values(values: Mapping[str, Any]) -> BudgetHold | None:
    """The budget hold a job item carries, or None."""
    if "budgetPeriod" not in values:
        return None
    return BudgetHold(
        period=values["budgetPeriod"],
        tokens=values["budgetTokens"],
        base_tokens=values.get("budgetBase", 0),
        run=values.get("budgetRun", 0),
    )


def plan_to_values(plan: PlanParameters) -> dict[str, Any]:
    """The plan parameters as item attributes (on the job and on its idempotency claim)."""
    return {
        "planVersion": plan.plan_version,
        "chunkTokens": plan.chunk_tokens,
        "stepOutputTokens": plan.step_output_tokens,
    }


def plan_from_values(values: Mapping[str, Any]) -> PlanParameters:
    """The plan parameters an item was written with (the first plan version's defaults if none)."""
    if "planVersion" not in values:
        return PlanParameters()
    return PlanParameters(
        plan_version=values["planVersion"],
        chunk_tokens=values["chunkTokens"],
        step_output_tokens=values["stepOutputTokens"],
    )
