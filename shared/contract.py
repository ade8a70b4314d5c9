"""The HTTP contract's bodies as pydantic models: what clients send and what they get back.

The OpenAPI document is generated from these models (docs/openapi.json), so a field
changed here changes the published contract, and the drift test says so.
"""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, Strict, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from shared.clock import to_iso
from shared.lifecycle import JobStatus
from shared.tiers import Tier

MAX_INPUT_TEXT_BYTES = 1_048_576
DOCUMENT_ID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
MAX_BODY_BYTES = 1_572_864  # 1.5 MiB: a larger body is 413 before any parsing
MAX_LABELS = 50
MAX_LABEL_CHARS = 100
# The most output tokens a call may ask for, and what a final call without `maxOutputTokens` sends
# (DESIGN.md, "Long inputs"): every call has a cap, so a budget reservation can bound it.
MAX_OUTPUT_TOKENS = 4096

Timestamp = Annotated[
    datetime,
    PlainSerializer(to_iso, return_type=str, when_used="json"),
    Field(json_schema_extra={"format": "date-time"}),
]


class Operation(StrEnum):
    """What the model is asked to do with the input."""

    SUMMARIZE = "summarize"
    ANALYZE = "analyze"
    CLASSIFY = "classify"
    EXTRACT = "extract"


# What a result's `output` holds: text, or (extract) the JSON value the schema describes.
OutputFormat = Literal["text", "json"]


def _without_null_branches(schema: dict[str, Any]) -> None:
    """Optional fields may be left out but never sent as null: say so in the JSON Schema too.

    pydantic documents `X | None = None` as "X or null"; the null branch is dropped here because
    the before-validator below refuses explicit nulls.
    """
    for name, field in schema.get("properties", {}).items():
        branches = field.get("anyOf")
        if not branches:
            continue
        kept = [branch for branch in branches if branch != {"type": "null"}]
        if len(kept) == 1 and len(kept) < len(branches):
            schema["properties"][name] = {**{k: v for k, v in field.items() if k != "anyOf"}, **kept[0]}


class StrictRequestModel(BaseModel):
    """A request body: camelCase on the wire, no unknown fields, no coercion, no explicit nulls."""

    # Strictness is per field (Strict below): a model-wide strict mode would refuse enum values
    # given as their JSON strings, which is how the resolver hands the body over.
    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=False,
        frozen=True,
        json_schema_extra=_without_null_branches,
    )

    @model_validator(mode="before")
    @classmethod
    def _reject_explicit_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            nulls = sorted(key for key, value in data.items() if value is None)
            if nulls:
                raise PydanticCustomError(
                    "null_not_allowed",
                    "Explicit null is not allowed: {fields}",
                    {"fields": ", ".join(str(key) for key in nulls)},
                )
        return data


def _text_within_limit(text: str) -> str:
    if len(text.encode("utf-8")) > MAX_INPUT_TEXT_BYTES:
        # The error type, not its message, is what shared.problems maps to 413.
        raise PydanticCustomError(
            "input_too_large", "input.text is over {limit} UTF-8 bytes", {"limit": MAX_INPUT_TEXT_BYTES}
        )
    return text


def _labels_distinct(labels: list[str]) -> list[str]:
    if len(set(labels)) != len(labels):
        raise PydanticCustomError("labels_not_distinct", "labels must be distinct")
    return labels


class JobInputBody(StrictRequestModel):
    """The material the operation works on: exactly one of `text` and `documentId`."""

    text: Annotated[str, Strict(), Field(min_length=1), AfterValidator(_text_within_limit)] | None = None
    document_id: (
        Annotated[
            str,
            Strict(),
            Field(
                pattern=DOCUMENT_ID_PATTERN,
                description=(
                    "A Ready document of the caller's (POST /v1/documents): its extracted text is the "
                    "input, as `text` would be."
                ),
            ),
        ]
        | None
    ) = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.text is None) == (self.document_id is None):
            raise PydanticCustomError("input_exactly_one", "input needs exactly one of text and documentId")
        return self


Label = Annotated[str, Strict(), Field(min_length=1, max_length=MAX_LABEL_CHARS, pattern=r"\S")]


class JobOptions(StrictRequestModel):
    """Optional knobs; the server's defaults apply to whatever is left out."""

    model: Annotated[str, Strict(), Field(min_length=1, max_length=100)] | None = None
    max_output_tokens: Annotated[int, Strict(), Field(ge=1, le=MAX_OUTPUT_TOKENS)] | None = None
    labels: (
        Annotated[list[Label], Field(min_length=1, max_length=MAX_LABELS), AfterValidator(_labels_distinct)]
        | None
    ) = None
    # Not `schema`: that name shadows a BaseModel attribute. Whether the schema is inside the strict
    # subset is the submit's check (shared.extraction.schema_subset): `invalid_schema` names where.
    output_schema: dict[str, Any] | None = Field(
        default=None,
        alias="schema",
        description=(
            "For extract (required there, refused elsewhere): the JSON Schema of the object to "
            "extract, in the subset strict structured outputs accept (an object root; every object "
            "lists all its properties in `required` and sets `additionalProperties: false`; string, "
            "number, integer, boolean, null, array, object, enum, anyOf; at most 100 properties, 5 "
            "levels of objects and 15,000 bytes)."
        ),
        json_schema_extra={
            "examples": [
                {
                    "type": "object",
                    "properties": {"vendor": {"type": "string"}, "total": {"type": "number"}},
                    "required": ["vendor", "total"],
                    "additionalProperties": False,
                }
            ]
        },
    )
    stream: (
        Annotated[
            bool,
            Strict(),
            Field(
                description=(
                    "Stream the output as it is written (summarize, analyze and extract, whose "
                    "streamed text is its JSON document): read it from GET /v1/jobs/{id}/output or "
                    "follow the job over the WebSocket."
                )
            ),
        ]
        | None
    ) = None
    tier: (
        Annotated[
            Tier,
            Field(
                description=(
                    "How the provider runs the job's calls: `standard` (the default) or `flex` (about "
                    "half the token price; calls may wait and are retried at no attempt's cost, and go "
                    "out at the standard tier once the job has waited the stage's flexFallbackSeconds). "
                    "A model and tier the stage does not price or allow is 400 tier_unavailable."
                )
            ),
        ]
        | None
    ) = None


# Operations whose output may be streamed (DESIGN.md, "Streaming output"): classify answers one
# label, nothing to watch grow. extract streams its JSON document as it is generated.
STREAMING_OPERATIONS = frozenset({Operation.SUMMARIZE, Operation.ANALYZE, Operation.EXTRACT})
# Options added after the first release, at their default value: left out of the fingerprint, so a
# retry that spells a default out (or leaves it out) still replays (DESIGN.md, "Streaming output").
_NEW_OPTION_DEFAULTS: dict[str, Any] = {"stream": False, "tier": Tier.STANDARD.value}


class SubmitRequest(StrictRequestModel):
    """The body of POST /v1/jobs."""

    operation: Operation
    input: JobInputBody
    options: JobOptions | None = None

    @model_validator(mode="after")
    def _options_match_operation(self) -> Self:
        labels = self.options.labels if self.options else None
        if self.operation is Operation.CLASSIFY and not labels:
            raise PydanticCustomError("labels_required", "classify needs options.labels")
        if self.operation is not Operation.CLASSIFY and labels is not None:
            raise PydanticCustomError("labels_not_allowed", "options.labels is only for classify")
        schema = self.options.output_schema if self.options else None
        if self.operation is Operation.EXTRACT and schema is None:
            raise PydanticCustomError("schema_required", "extract needs options.schema")
        if self.operation is not Operation.EXTRACT and schema is not None:
            raise PydanticCustomError("schema_not_allowed", "options.schema is only for extract")
        return self

    @model_validator(mode="after")
    def _stream_fits_operation(self) -> Self:
        if self.stream and self.operation not in STREAMING_OPERATIONS:
            raise PydanticCustomError(
                "stream_not_supported",
                "options.stream is for {operations}",
                {"operations": ", ".join(sorted(op.value for op in STREAMING_OPERATIONS))},
            )
        # A batch answer arrives whole, hours later: nothing to stream (DESIGN.md, "Streaming output").
        if self.stream and self.tier is Tier.BATCH:
            raise PydanticCustomError(
                "stream_not_supported", "options.stream is not available with tier batch"
            )
        return self

    @property
    def stream(self) -> bool:
        """True when the client asked for the output as it is written."""
        return bool(self.options and self.options.stream)

    @property
    def tier(self) -> Tier:
        """The tier the client asked for (standard when left out)."""
        return (self.options.tier if self.options else None) or Tier.STANDARD

    def client_fields(self) -> dict[str, Any]:
        """The fields the client sent, in wire form: the input of the fingerprint.

        Options newer than the fingerprint rule (`stream`, `tier`) are left out at their
        default value, and an `options` object that only held such defaults is left out with them:
        `{"stream": false}` and no `stream` at all are the same request (DESIGN.md, "Streaming
        output"). Every other field is exactly as sent.
        """
        fields = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        options = fields.get("options")
        if isinstance(options, dict):
            kept = {
                name: value
                for name, value in options.items()
                if name not in _NEW_OPTION_DEFAULTS or value != _NEW_OPTION_DEFAULTS[name]
            }
            if kept or not options.keys() & _NEW_OPTION_DEFAULTS.keys():
                fields["options"] = kept
            else:
                del fields["options"]
        return fields


class ResponseModel(BaseModel):
    """A response body: camelCase on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict the API returns."""
        return self.model_dump(mode="json", by_alias=True)


class ErrorDocument(ResponseModel):
    """Why a job failed: a stable code and a message safe to show."""

    code: str
    message: str


class UsageDocument(ResponseModel):
    """Tokens the model reported."""

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = Field(
        default=0,
        description="Of inputTokens, those the provider read from its prompt cache (billed at a discount).",
    )
    tiers: list[Tier] = Field(
        default_factory=list,
        description="The tiers the job's calls ran at (a flex job that fell back shows both).",
    )
    estimated: bool = Field(
        default=False,
        description=(
            "True when part of it is outlast's estimate: a streamed call that ended without the "
            "provider's usage report (cut, or canceled) counts ceil(UTF-8 bytes / 4) per side."
        ),
    )


class ProgressDocument(ResponseModel):
    """How far a job is: steps whose output is checkpointed, of the steps its plan has."""

    completed_steps: int
    total_steps: int


class StatusDocument(ResponseModel):
    """Where a job stands; every submit, status and cancel answer carries one."""

    job_id: str
    status: JobStatus
    operation: Operation
    created_at: Timestamp
    updated_at: Timestamp
    expires_at: Timestamp
    attempts: int
    crashes: int
    # Grows with every write of the job: of two documents of one job, the higher is the newer.
    revision: int
    progress: ProgressDocument
    cancel_requested_at: Timestamp | None
    result_url: str | None
    error: ErrorDocument | None
    usage: UsageDocument | None
    # The tokens this run of the job holds of its tenant's monthly budget until it is settled (the
    # job ended and its usage was counted); null once settled, and for tenants without a budget.
    reserved_tokens: int | None
    # Defaults for clients of an older document: a field added later never breaks their parsing.
    stream: bool = Field(
        default=False,
        description="The output is streamed as it is written: GET /v1/jobs/{id}/output, or follow the job.",
    )
    waiting_for: Literal["provider_batch"] | None = Field(
        default=None,
        description=(
            "What a Running job waits on while no worker holds it: `provider_batch` while its calls "
            "are in the provider's Batch API (tier `batch`); null otherwise."
        ),
    )


class ResultDocument(ResponseModel):
    """The output of a Succeeded job."""

    job_id: str
    operation: Operation
    output: str | dict[str, Any] = Field(
        description=(
            "The job's output: text (outputFormat `text`), or for extract the JSON object that "
            "matches the job's schema (outputFormat `json`)."
        )
    )
    output_format: OutputFormat = Field(description="`json` for extract, `text` for the other operations.")
    usage: UsageDocument | None


class OutputEventDocument(ResponseModel):
    """A piece of a streaming job's output, in the order it was written (DESIGN.md, "Streaming output")."""

    job_id: str
    attempt: int = Field(description="The output attempt: each claim that streams takes the next one.")
    seq: int = Field(description="From 1 within an attempt, without gaps.")
    text: str


class OutputPage(ResponseModel):
    """GET /v1/jobs/{id}/output: the events after a cursor, in (attempt, seq) order."""

    events: list[OutputEventDocument]
    next_cursor: str | None = Field(
        description="`after` for the next read (ATTEMPT.SEQ); null once `complete`."
    )
    complete: bool = Field(description="The job has ended and every event after the cursor is in this page.")
    result_attempt: int | None = Field(
        description=(
            "The attempt whose text the result holds (a Succeeded job); readers show it once the job "
            "has ended, and the highest attempt they have seen before."
        )
    )


class JobPage(ResponseModel):
    """One page of the caller's jobs, newest first."""

    items: list[StatusDocument]
    next_cursor: str | None


class BudgetDocument(ResponseModel):
    """The caller's tenant's token budget this calendar month (UTC): GET /v1/budget."""

    period: str = Field(description="The calendar month (UTC), YYYY-MM.", pattern=r"^\d{4}-\d{2}$")
    limit_tokens: int | None = Field(description="The monthly limit; null: no limit.")
    used_tokens: int = Field(description="Tokens the period's ended jobs used.")
    reserved_tokens: int = Field(description="Tokens held by jobs not settled yet (their upper bound).")
    remaining_tokens: int | None = Field(description="What new jobs may still reserve; null: no limit.")
    resets_at: Timestamp = Field(description="When the next period starts.")


class InvalidParam(ResponseModel):
    """Which part of the request was wrong, without echoing it back."""

    name: str
    reason: str


class GatewayMessage(ResponseModel):
    """API Gateway's own answer (its authorizer, throttling, a failed or timed-out function)."""

    message: str


class Problem(ResponseModel):
    """An RFC 9457 problem document."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    correlation_id: str
    invalid_params: list[InvalidParam] | None = None
