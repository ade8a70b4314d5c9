"""`outlast ops jobs inspect`: the operator's view of one job, read straight from the tables and queues.

The full internal record (lease, attempts, stalls, crashes, isolation, dispatchAt, redriveCount,
the sweeper's next look), its plan's steps and which are checkpointed (with each output's size
and usage), where its input and result live and how big they are, and which
messages on either DLQ (the jobs queue's and the isolation queue's) name it. Never the
input or output text (logs and outputs hold neither, DESIGN.md "Security"), never a whole lease
token: its first characters tell two leases apart, which is all an operator needs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from infra.prices import read_price_table
from outlast.operator.dlq import DEFAULT_MAX_MESSAGES, QueueDepth, held_messages, queue_depth, read_job
from outlast.operator.plan import DeadLetter
from outlast.operator.targets import Target
from shared import resources as r
from shared.adapters.dynamo_items import INPUT_SORT_VALUE, RESULT_SORT_VALUE, deserialize, job_key, job_pk
from shared.clock import from_iso, to_iso
from shared.job import BlobLocation, JobInput, JobRecord, Usage
from shared.payload_reads import input_of, result_of
from shared.planner import plan_of
from shared.ports import Lane
from shared.prices import CostRange, job_cost
from shared.tiers import Tier

LEASE_TOKEN_PREFIX = 8


@dataclass(frozen=True)
class Payload:
    """Where an input or a result lives, whether it is still there, and its size (never its text)."""

    location: BlobLocation
    address: str
    present: bool
    text_bytes: int | None  # UTF-8 bytes of the input text or of the output
    details: tuple[str, ...] = ()


@dataclass(frozen=True)
class SweepEntry:
    """The job's place in the sweeper's sparse index (only watched jobs have one)."""

    shard: str
    at: datetime


@dataclass(frozen=True)
class Lanes:
    """One of the two job queues and its DLQ, as far as this job is concerned."""

    queue_depth: QueueDepth
    dlq_depth: QueueDepth
    dlq_messages: list[DeadLetter] | None  # None: the DLQ was not read
    dlq_incomplete: bool  # reading stopped (message limit, or to stay within its hold): more may remain


@dataclass(frozen=True)
class StepRow:
    """One step of the job's plan, and its checkpoint if it has one (sizes, never text)."""

    step_id: str
    kind: str
    reads: str  # `chunk 3` for a map step (from 1), the ids of the outputs a reduce combines
    checkpointed: bool
    output_bytes: int | None
    usage: Usage | None


@dataclass(frozen=True)
class Inspection:
    """Everything `jobs inspect` shows about one job."""

    job: JobRecord
    sweep: SweepEntry | None
    input: Payload
    result: Payload | None
    steps: list[StepRow] | None  # None: the input is gone, so the plan cannot be made again
    lanes: dict[Lane, Lanes]  # the jobs queue and the isolation queue, each with its DLQ
    now: datetime

    @property
    def token_cost(self) -> CostRange | None:
        """What the job's tokens cost under docs/model-prices.json (None: no usage, or a model the
        table does not price)."""
        return token_cost(self.job)


def token_cost(job: JobRecord) -> CostRange | None:
    """The dollars of a job's usage at the tiers its calls ran at (DESIGN.md, "Cost tiers")."""
    usage = job.usage
    if usage is None:
        return None
    return job_cost(
        read_price_table(),
        job.model,
        tiers=usage.tiers,
        input_tokens=usage.input_tokens,
        cached_input_tokens=usage.cached_input_tokens,
        output_tokens=usage.output_tokens,
    )


def lease_prefix(token: str | None) -> str | None:
    """The first characters of a lease token, never the whole of it."""
    return f"{token[:LEASE_TOKEN_PREFIX]}..." if token else None


class UnreadableJobError(Exception):
    """The job's record exists but this version of outlast cannot read it."""


def inspect_job(target: Target, job_id: str, now: datetime, *, read_dlq: bool) -> Inspection | None:
    """The job's operator view, or None when no such job exists."""
    job, unreadable = read_job(target.repository, job_id)
    if unreadable is not None:
        raise UnreadableJobError(f"the record of job {job_id} cannot be read ({unreadable})")
    if job is None:
        return None
    job_input = input_of(job, target.payloads)
    return Inspection(
        job=job,
        sweep=_sweep_entry(target, job_id),
        input=_input(target, job, job_input),
        result=_result(target, job),
        steps=_steps(target, job, job_input, now) if job_input is not None else None,
        lanes={lane: _lane(target, lane, job_id, read_dlq=read_dlq) for lane in Lane},
        now=now,
    )


def _lane(target: Target, lane: Lane, job_id: str, *, read_dlq: bool) -> Lanes:
    """A queue's depth, and its DLQ's depth and messages for the job (a job's messages can be on
    either DLQ: it ran from the isolation queue once isolated)."""
    dlq_url = target.resources.dlq_url_of(lane)
    dlq_messages = None
    dlq_incomplete = False
    if read_dlq:
        with held_messages(
            target.sqs,
            dlq_url,
            hold_seconds=30,
            max_messages=DEFAULT_MAX_MESSAGES,
            wait_seconds=target.receive_wait_seconds,
            monotonic=time.monotonic,
        ) as hold:
            dlq_messages = [letter for letter in hold.letters if letter.job_id == job_id]
        dlq_incomplete = hold.limit_reached or hold.out_of_time
    return Lanes(
        queue_depth=queue_depth(target.sqs, target.resources.queue_url(lane)),
        dlq_depth=queue_depth(target.sqs, dlq_url),
        dlq_messages=dlq_messages,
        dlq_incomplete=dlq_incomplete,
    )


def _sweep_entry(target: Target, job_id: str) -> SweepEntry | None:
    # The two index keys are not part of JobRecord: read just them.
    item = target.dynamodb.get_item(
        TableName=target.resources.jobs_table,
        Key=job_key(job_id),
        ConsistentRead=True,
        ProjectionExpression="#shard, #at",
        ExpressionAttributeNames={"#shard": r.SWEEP_INDEX_PARTITION, "#at": r.SWEEP_INDEX_SORT},
    ).get("Item")
    values = deserialize(item) if item else {}
    if r.SWEEP_INDEX_SORT not in values:
        return None
    return SweepEntry(
        shard=str(values.get(r.SWEEP_INDEX_PARTITION, "")), at=from_iso(values[r.SWEEP_INDEX_SORT])
    )


def _address(target: Target, job_id: str, location: BlobLocation, sort: str, prefix: str) -> str:
    if location == "job":
        return f"inside the job item ({r.PARTITION_KEY}={job_pk(job_id)} {r.SORT_KEY}=JOB)"
    if location == "s3":
        return f"s3://{target.resources.payload_bucket}/{prefix}{job_id}.json"
    return f"table {target.resources.jobs_table}, {r.PARTITION_KEY}={job_pk(job_id)} {r.SORT_KEY}={sort}"


def _steps(target: Target, job: JobRecord, job_input: JobInput, now: datetime) -> list[StepRow]:
    """The plan the worker makes of the stored input, joined with the checkpoints."""
    plan = plan_of(job, job_input)
    checkpoints = target.steps.get_steps(job.job_id, now) if plan.total_steps > 1 else {}
    rows = []
    for step in plan.steps:
        found = checkpoints.get(step.step_id)
        reads = (
            ", ".join(step.inputs) if step.inputs else f"chunk {(step.chunk or 0) + 1} of {len(plan.chunks)}"
        )
        rows.append(
            StepRow(
                step_id=step.step_id,
                kind=step.kind.value,
                reads=reads,
                checkpointed=found is not None,
                output_bytes=len(found.output.encode()) if found is not None else None,
                usage=found.usage if found is not None else None,
            )
        )
    return rows


def _input(target: Target, job: JobRecord, found: JobInput | None) -> Payload:
    address = _address(target, job.job_id, job.input_location, INPUT_SORT_VALUE, r.INPUT_PREFIX)
    if found is None:
        return Payload(job.input_location, address, present=False, text_bytes=None)
    details = []
    if found.labels is not None:
        details.append(f"{len(found.labels)} labels")
    if found.max_output_tokens is not None:
        details.append(f"maxOutputTokens {found.max_output_tokens}")
    return Payload(
        job.input_location, address, present=True, text_bytes=len(found.text.encode()), details=tuple(details)
    )


def _result(target: Target, job: JobRecord) -> Payload | None:
    if job.result_location is None:
        return None
    found = result_of(job, target.payloads)
    address = _address(target, job.job_id, job.result_location, RESULT_SORT_VALUE, r.RESULT_PREFIX)
    return Payload(
        job.result_location,
        address,
        present=found is not None,
        text_bytes=len(found.output.encode()) if found is not None else None,
    )


def _cost_document(cost: CostRange | None) -> dict[str, float] | None:
    if cost is None:
        return None
    return {"low": round(cost.low, 8), "high": round(cost.high, 8)}


def inspection_document(inspection: Inspection) -> dict[str, Any]:
    """The inspection as one JSON-ready document (`jobs inspect --json`)."""
    job = inspection.job
    return {
        "jobId": job.job_id,
        "status": job.status.value,
        "operation": job.operation.value,
        "tenant": job.tenant,
        "owner": job.owner,
        "model": job.model,
        "promptVersion": job.prompt_version,
        "createdAt": _iso(job.created_at),
        "updatedAt": _iso(job.updated_at),
        "expiresAt": _iso(job.expires_at),
        "attempts": job.attempts,
        "maxAttempts": job.max_attempts,
        "stalls": job.stalls,
        "crashes": job.crashes,
        "solo": job.solo,
        "isolated": job.isolated,
        "redriveCount": job.redrive_count,
        "dispatchAt": _iso(job.dispatch_at),
        "cancelRequestedAt": _iso(job.cancel_requested_at),
        "lease": (
            {
                "tokenPrefix": lease_prefix(job.lease_token),
                "expiresAt": _iso(job.lease_expires_at),
                "live": job.lease_expires_at is not None and job.lease_expires_at > inspection.now,
            }
            if job.lease_token or job.lease_expires_at
            else None
        ),
        "error": {"code": job.error.code, "message": job.error.message} if job.error else None,
        "tier": job.tier.value,
        # The batch tier (DESIGN.md, "Cost tiers"): what the job waits on, in which provider batch,
        # whether a batch of it expired or failed (its calls then run at flex, then standard), and
        # the tokens of answers its batches gave it after it had moved on (in its usage, counted
        # into its tenant's budget apart from its runs' settlements).
        "batch": {
            "waitingFor": job.waiting_for,
            "batchId": job.batch_id,
            "fallback": job.batch_fallback,
            "lateTokens": job.late_tokens,
        }
        if job.tier is Tier.BATCH
        else None,
        "usage": (
            {
                "inputTokens": job.usage.input_tokens,
                "outputTokens": job.usage.output_tokens,
                "cachedInputTokens": job.usage.cached_input_tokens,
                "tiers": sorted(tier.value for tier in job.usage.tiers),
            }
            if job.usage
            else None
        ),
        "tokenCostUsd": _cost_document(inspection.token_cost),
        "sweep": (
            {"shard": inspection.sweep.shard, "at": _iso(inspection.sweep.at)} if inspection.sweep else None
        ),
        "plan": {
            "planVersion": job.plan.plan_version,
            "chunkTokens": job.plan.chunk_tokens,
            "stepOutputTokens": job.plan.step_output_tokens,
            "completedSteps": job.completed_steps,
            "totalSteps": job.total_steps,
            "steps": [_step_document(row) for row in inspection.steps]
            if inspection.steps is not None
            else None,
        },
        "input": _payload_document(inspection.input),
        "result": _payload_document(inspection.result) if inspection.result else None,
        "messages": _messages_document(inspection.lanes),
        "inspectedAt": _iso(inspection.now),
    }


def _messages_document(lanes: dict[Lane, Lanes]) -> dict[str, Any]:
    shared, isolation = lanes[Lane.SHARED], lanes[Lane.ISOLATION]
    return {
        "dlq": _letters_document(shared.dlq_messages),
        "dlqIncomplete": shared.dlq_incomplete,
        "dlqDepth": _depth_document(shared.dlq_depth),
        "jobsQueueDepth": _depth_document(shared.queue_depth),
        "isolationDlq": _letters_document(isolation.dlq_messages),
        "isolationDlqIncomplete": isolation.dlq_incomplete,
        "isolationDlqDepth": _depth_document(isolation.dlq_depth),
        "isolationQueueDepth": _depth_document(isolation.queue_depth),
    }


def _letters_document(letters: list[DeadLetter] | None) -> list[dict[str, Any]] | None:
    if letters is None:
        return None
    return [
        {
            "messageId": m.message_id,
            "source": m.source,
            "receiveCount": m.receive_count,
            "sentAt": _iso(m.sent_at),
        }
        for m in letters
    ]


def _payload_document(payload: Payload) -> dict[str, Any]:
    return {
        "location": payload.location,
        "address": payload.address,
        "present": payload.present,
        "textBytes": payload.text_bytes,
        "details": list(payload.details),
    }


def _depth_document(depth: QueueDepth) -> dict[str, int]:
    return {"visible": depth.visible, "inFlight": depth.in_flight, "delayed": depth.delayed}


def _iso(instant: datetime | None) -> str | None:
    return to_iso(instant) if instant is not None else None


def _step_document(row: StepRow) -> dict[str, Any]:
    return {
        "stepId": row.step_id,
        "kind": row.kind,
        "reads": row.reads,
        "checkpointed": row.checkpointed,
        "outputBytes": row.output_bytes,
        "usage": (
            {"inputTokens": row.usage.input_tokens, "outputTokens": row.usage.output_tokens}
            if row.usage
            else None
        ),
    }
