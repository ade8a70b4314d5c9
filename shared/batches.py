"""The batch tier's domain (DESIGN.md, "Cost tiers: the token bill"): calls handed to the batcher,
the provider batches they go into, and what a batch's output lines are worth. Pure: no AWS, no SDK.

The worker hands a batch job's ready calls to the batcher (one `BatchCall` a queue message) and
ends its claim: the job stays Running, `waitingFor: provider_batch`, its lease token now the batch
hold. The batcher writes one JSONL file per model (`custom_id` names the job, the step and the
claim's attempt) and creates the batch; the poller reads each ended batch's lines back to the calls
they answer (`answer_of`), writes the answers as checkpoints, and hands each job back.
"""

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from shared.extraction.answers import AnswerVerdict, SchemaValidator, check_answer
from shared.job import Usage
from shared.tiers import Tier

COMPLETION_WINDOW: Final = "24h"
COMPLETION_WINDOW_SECONDS = 24 * 3600
# The hold outlives the batch's window by this much: the poller's schedule, and a late finish.
HOLD_GRACE_SECONDS = 3600
CHAT_ENDPOINT: Final = "/v1/chat/completions"
# The metadata key a provider batch carries its write-ahead intent's id under (BatchIntent).
INTENT_METADATA_KEY: Final = "outlast_intent"
_SEPARATOR = ":"


class BatchCall(BaseModel):
    """One call of a job, handed to the batcher: what to ask, and whose answer it is."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    hold: str  # the job's lease token while its calls are in a batch: only it may hand the job back
    step_id: str
    attempt: int  # the claim's attempt: a later claim's call of the same step is another line
    final: bool  # a one-step job's only call: its answer is the job's result, not a step checkpoint
    structured: bool = False  # extract: the answer is checked against the line's schema first
    model: str
    body: dict[str, Any]  # the Chat Completions arguments (shared.batches.batch_line)

    @property
    def custom_id(self) -> str:
        """The line's name in the batch: job, step and attempt (none holds ':')."""
        return _SEPARATOR.join((self.job_id, self.step_id, str(self.attempt)))

    def without_body(self) -> "BatchCall":
        """What the open batch keeps of the call (the provider holds the request)."""
        return self.model_copy(update={"body": {}})


def hold_expiry(now: datetime) -> datetime:
    """Until when a job waits on its batch: the batch's window plus a grace (a lapse is no crash)."""
    return now + timedelta(seconds=COMPLETION_WINDOW_SECONDS + HOLD_GRACE_SECONDS)


def batch_line(call: BatchCall) -> dict[str, Any]:
    """One line of the batch's input file (OpenAI's Batch API)."""
    return {"custom_id": call.custom_id, "method": "POST", "url": CHAT_ENDPOINT, "body": call.body}


def input_file(calls: Iterable[BatchCall]) -> bytes:
    """The JSONL input file of one batch."""
    return "".join(json.dumps(batch_line(call), separators=(",", ":")) + "\n" for call in calls).encode()


def by_model(calls: Iterable[BatchCall]) -> dict[str, list[BatchCall]]:
    """One batch per model (a batch's lines must all name the same model), each call once."""
    grouped: dict[str, dict[str, BatchCall]] = {}
    for call in calls:
        grouped.setdefault(call.model, {})[call.custom_id] = call
    return {model: list(found.values()) for model, found in grouped.items()}


class BatchStatus(StrEnum):
    """The provider's batch statuses that matter here; the rest are 'still running'."""

    COMPLETED = "completed"
    EXPIRED = "expired"
    FAILED = "failed"
    CANCELLED = "cancelled"


ENDED = frozenset(BatchStatus)


class ProviderBatch(BaseModel):
    """A provider batch as retrieved: its status and the files that hold its answers."""

    model_config = ConfigDict(frozen=True)

    batch_id: str
    status: str
    input_file_id: str
    output_file_id: str | None = None
    error_file_id: str | None = None

    @property
    def ended(self) -> bool:
        """True once the provider will answer nothing more (completed, expired, failed, cancelled)."""
        return self.status in ENDED


class OpenBatch(BaseModel):
    """A batch the poller still has to see through: its provider id and the calls in it."""

    model_config = ConfigDict(frozen=True)

    batch_id: str
    model: str
    created_at: datetime
    calls: tuple[BatchCall, ...]  # without bodies
    # A batch its batcher died before recording (found through its BatchIntent): no job waits on
    # it, so its answers are never kept; what the provider billed for them is late usage.
    orphaned: bool = False

    @property
    def job_ids(self) -> list[str]:
        """Each job with a call in the batch, once, in the order of its calls."""
        return list(dict.fromkeys(call.job_id for call in self.calls))

    def overdue(self, now: datetime) -> bool:
        """True when the batch is still open past its completion window (an alarm's matter). An
        orphan stays open until its jobs end, which is no provider's delay."""
        return not self.orphaned and now - self.created_at > timedelta(seconds=COMPLETION_WINDOW_SECONDS)


class BatchIntent(BaseModel):
    """The batcher's write-ahead record of a batch it is about to create: written before the
    provider's create, deleted once the batch is recorded under its provider id. One left behind
    names a batcher that died in between; the poller looks the provider's batches up for the one
    whose metadata names the intent (`INTENT_METADATA_KEY`)."""

    model_config = ConfigDict(frozen=True)

    intent_id: str
    model: str
    created_at: datetime
    calls: tuple[BatchCall, ...]  # without bodies

    @property
    def job_ids(self) -> list[str]:
        """Each job with a call in the intended batch, once."""
        return list(dict.fromkeys(call.job_id for call in self.calls))

    def metadata(self) -> dict[str, str]:
        """The provider batch's metadata: whose batch it is, and the intent that names it."""
        return {"source": "outlast", INTENT_METADATA_KEY: self.intent_id}

    def orphan(self, batch_id: str) -> OpenBatch:
        """The provider batch found for this intent, as an open batch nobody waits on."""
        return OpenBatch(
            batch_id=batch_id, model=self.model, created_at=self.created_at, calls=self.calls, orphaned=True
        )

    def unresolved(self, now: datetime, grace: timedelta) -> bool:
        """True while its batcher may still be between the create and the record (its timeout)."""
        return now - self.created_at < grace


class OpenEntries(BaseModel):
    """What the open batches' table holds: the batches to see through, the intents to resolve."""

    model_config = ConfigDict(frozen=True)

    batches: tuple[OpenBatch, ...] = ()
    intents: tuple[BatchIntent, ...] = ()


class BatchAnswer(BaseModel):
    """An answer the batch gave a call, fit to keep: its text and what it cost (batch tokens)."""

    model_config = ConfigDict(frozen=True)

    text: str
    usage: Usage | None


def answer_of(
    line: Mapping[str, Any], schema: dict[str, Any] | None, validator: SchemaValidator
) -> BatchAnswer | None:
    """A line of the output file as an answer to keep, or None: refused, filtered, cut by its limit,
    or off its schema. Such a call is made again outside the batch (flex, then standard), where it
    is classified as any call is (DESIGN.md: per-call errors are classified as today)."""
    response = line.get("response") or {}
    body = response.get("body") or {}
    if response.get("status_code") != 200 or line.get("error"):
        return None
    choices = body.get("choices") or []
    if not choices:
        return None
    choice = choices[0]
    message = choice.get("message") or {}
    if choice.get("finish_reason") != "stop" or message.get("refusal"):
        return None
    text = str(message.get("content") or "").strip()
    if schema is not None:
        verdict = check_answer(text, schema, validator, cut_by_limit=False)
        if verdict.verdict is not AnswerVerdict.VALID:
            return None
    return BatchAnswer(text=text, usage=_usage_of(body.get("usage")))


def billed_usage(line: Mapping[str, Any]) -> Usage | None:
    """What the provider billed for a line of the output file, whatever its answer (kept or not)."""
    return _usage_of(((line.get("response") or {}).get("body") or {}).get("usage"))


def schema_of(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON Schema a line's request asked its answer to match, if any."""
    response_format = body.get("response_format") or {}
    schema = (response_format.get("json_schema") or {}).get("schema")
    return schema if isinstance(schema, dict) else None


def _usage_of(usage: Mapping[str, Any] | None) -> Usage | None:
    if not usage:
        return None
    details = usage.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=int(usage.get("prompt_tokens", 0)),
        output_tokens=int(usage.get("completion_tokens", 0)),
        cached_input_tokens=int(details.get("cached_tokens") or 0),
        tiers=frozenset({Tier.BATCH}),
    )
