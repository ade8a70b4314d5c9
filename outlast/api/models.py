"""GENERATED from docs/openapi.json by datamodel-code-generator (`make openapi`): do not edit.

The API's documents as pydantic models; tests/contract/test_client_types.py fails when this file is
not exactly what the generator makes of the committed document.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, RootModel


class BudgetDocument(BaseModel):
    """
    The caller's tenant's token budget this calendar month (UTC): GET /v1/budget.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    limit_tokens: Annotated[
        int | None,
        Field(
            alias="limitTokens",
            description="The monthly limit; null: no limit.",
            title="Limittokens",
        ),
    ]
    period: Annotated[
        str,
        Field(
            description="The calendar month (UTC), YYYY-MM.",
            pattern="^\\d{4}-\\d{2}$",
            title="Period",
        ),
    ]
    remaining_tokens: Annotated[
        int | None,
        Field(
            alias="remainingTokens",
            description="What new jobs may still reserve; null: no limit.",
            title="Remainingtokens",
        ),
    ]
    reserved_tokens: Annotated[
        int,
        Field(
            alias="reservedTokens",
            description="Tokens held by jobs not settled yet (their upper bound).",
            title="Reservedtokens",
        ),
    ]
    resets_at: Annotated[
        AwareDatetime,
        Field(
            alias="resetsAt",
            description="When the next period starts.",
            title="Resetsat",
        ),
    ]
    used_tokens: Annotated[
        int,
        Field(
            alias="usedTokens",
            description="Tokens the period's ended jobs used.",
            title="Usedtokens",
        ),
    ]


class CreateDocumentRequest(BaseModel):
    """
    `POST /v1/documents`: the file about to be uploaded.

    `contentType` is any string here, so that a type outside the list is a 415 with its own code,
    not a schema error; the service checks it against ContentType.
    """

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
    )
    bytes: Annotated[
        int,
        Field(
            description="The file's size: the most the upload may be.",
            ge=1,
            title="Bytes",
        ),
    ]
    content_type: Annotated[
        str,
        Field(alias="contentType", max_length=255, min_length=1, title="Contenttype"),
    ]
    filename: Annotated[str, Field(max_length=255, min_length=1, title="Filename")]


class CreatedDocument(BaseModel):
    """
    What the create answers: the document's id and how to upload its file.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    document_id: Annotated[str, Field(alias="documentId", title="Documentid")]
    status: Annotated[
        Literal["AwaitingUpload", "Ready", "Rejected"],
        Field(
            description="Where a document stands. Ready and Rejected never change again (a new upload is a new document).",
            title="DocumentStatus",
        ),
    ]
    upload: UploadForm


class DocumentErrorDocument(BaseModel):
    """
    Why a document was rejected: a stable code and a message safe to show.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    code: Annotated[
        Literal[
            "unsupported_type",
            "document_encrypted",
            "document_has_no_text",
            "document_too_large",
            "document_unreadable",
        ],
        Field(
            description="Why a document was rejected: stable codes clients may branch on (DESIGN.md).",
            title="RejectCode",
        ),
    ]
    message: Annotated[str, Field(title="Message")]


class DocumentPage(BaseModel):
    """
    One page of the caller's documents, newest first.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    items: Annotated[list[DocumentStatusDocument], Field(title="Items")]
    next_cursor: Annotated[str | None, Field(alias="nextCursor", title="Nextcursor")]


class DocumentStatusDocument(BaseModel):
    """
    Where a document stands.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    bytes: Annotated[
        int,
        Field(
            description="The size the create declared: the most the upload may be.",
            title="Bytes",
        ),
    ]
    content_type: Annotated[
        Literal[
            "text/plain",
            "text/markdown",
            "application/pdf",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ],
        Field(
            alias="contentType",
            description="The types a document may be declared as; any other is refused at the create (415).",
            title="ContentType",
        ),
    ]
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    document_id: Annotated[str, Field(alias="documentId", title="Documentid")]
    error: Annotated[
        DocumentErrorDocument | None,
        Field(description="Set once the document is Rejected."),
    ]
    expires_at: Annotated[AwareDatetime, Field(alias="expiresAt", title="Expiresat")]
    filename: Annotated[str, Field(title="Filename")]
    ready: Annotated[
        ReadyDocument | None, Field(description="Set once the document is Ready.")
    ]
    status: Annotated[
        Literal["AwaitingUpload", "Ready", "Rejected"],
        Field(
            description="Where a document stands. Ready and Rejected never change again (a new upload is a new document).",
            title="DocumentStatus",
        ),
    ]
    updated_at: Annotated[AwareDatetime, Field(alias="updatedAt", title="Updatedat")]


class ErrorDocument(BaseModel):
    """
    Why a job failed: a stable code and a message safe to show.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    code: Annotated[str, Field(title="Code")]
    message: Annotated[str, Field(title="Message")]


class GatewayMessage(BaseModel):
    """
    API Gateway's own answer (its authorizer, throttling, a failed or timed-out function).
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    message: Annotated[str, Field(title="Message")]


class InvalidParam(BaseModel):
    """
    Which part of the request was wrong, without echoing it back.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    name: Annotated[str, Field(title="Name")]
    reason: Annotated[str, Field(title="Reason")]


class JobInputBody(BaseModel):
    """
    The material the operation works on: exactly one of `text` and `documentId`.
    """

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
    )
    document_id: Annotated[
        str | None,
        Field(
            alias="documentId",
            description="A Ready document of the caller's (POST /v1/documents): its extracted text is the input, as `text` would be.",
            pattern="^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
            title="Documentid",
        ),
    ] = None
    text: Annotated[str | None, Field(min_length=1, title="Text")] = None


class JobOptions(BaseModel):
    """
    Optional knobs; the server's defaults apply to whatever is left out.
    """

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
    )
    labels: Annotated[
        list[Label] | None, Field(max_length=50, min_length=1, title="Labels")
    ] = None
    max_output_tokens: Annotated[
        int | None,
        Field(alias="maxOutputTokens", ge=1, le=4096, title="Maxoutputtokens"),
    ] = None
    model: Annotated[str | None, Field(max_length=100, min_length=1, title="Model")] = (
        None
    )
    schema_: Annotated[
        dict[str, Any] | None,
        Field(
            alias="schema",
            description="For extract (required there, refused elsewhere): the JSON Schema of the object to extract, in the subset strict structured outputs accept (an object root; every object lists all its properties in `required` and sets `additionalProperties: false`; string, number, integer, boolean, null, array, object, enum, anyOf; at most 100 properties, 5 levels of objects and 15,000 bytes).",
            examples=[
                {
                    "additionalProperties": False,
                    "properties": {
                        "total": {"type": "number"},
                        "vendor": {"type": "string"},
                    },
                    "required": ["vendor", "total"],
                    "type": "object",
                }
            ],
            title="Schema",
        ),
    ] = None
    stream: Annotated[
        bool | None,
        Field(
            description="Stream the output as it is written (summarize, analyze and extract, whose streamed text is its JSON document): read it from GET /v1/jobs/{id}/output or follow the job over the WebSocket.",
            title="Stream",
        ),
    ] = None
    tier: Annotated[
        Literal["standard", "flex", "batch"] | None,
        Field(
            description="How the provider runs the job's calls: `standard` (the default) or `flex` (about half the token price; calls may wait and are retried at no attempt's cost, and go out at the standard tier once the job has waited the stage's flexFallbackSeconds). A model and tier the stage does not price or allow is 400 tier_unavailable.",
            title="Tier",
        ),
    ] = None


class JobPage(BaseModel):
    """
    One page of the caller's jobs, newest first.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    items: Annotated[list[StatusDocument], Field(title="Items")]
    next_cursor: Annotated[str | None, Field(alias="nextCursor", title="Nextcursor")]


class Label(RootModel[str]):
    root: Annotated[str, Field(max_length=100, min_length=1, pattern="\\S")]


class OutputEventDocument(BaseModel):
    """
    A piece of a streaming job's output, in the order it was written (DESIGN.md, "Streaming output").
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    attempt: Annotated[
        int,
        Field(
            description="The output attempt: each claim that streams takes the next one.",
            title="Attempt",
        ),
    ]
    job_id: Annotated[str, Field(alias="jobId", title="Jobid")]
    seq: Annotated[
        int, Field(description="From 1 within an attempt, without gaps.", title="Seq")
    ]
    text: Annotated[str, Field(title="Text")]


class OutputPage(BaseModel):
    """
    GET /v1/jobs/{id}/output: the events after a cursor, in (attempt, seq) order.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    complete: Annotated[
        bool,
        Field(
            description="The job has ended and every event after the cursor is in this page.",
            title="Complete",
        ),
    ]
    events: Annotated[list[OutputEventDocument], Field(title="Events")]
    next_cursor: Annotated[
        str | None,
        Field(
            alias="nextCursor",
            description="`after` for the next read (ATTEMPT.SEQ); null once `complete`.",
            title="Nextcursor",
        ),
    ]
    result_attempt: Annotated[
        int | None,
        Field(
            alias="resultAttempt",
            description="The attempt whose text the result holds (a Succeeded job); readers show it once the job has ended, and the highest attempt they have seen before.",
            title="Resultattempt",
        ),
    ]


class Problem(BaseModel):
    """
    An RFC 9457 problem document.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    code: Annotated[str, Field(title="Code")]
    correlation_id: Annotated[str, Field(alias="correlationId", title="Correlationid")]
    detail: Annotated[str, Field(title="Detail")]
    invalid_params: Annotated[
        list[InvalidParam] | None, Field(alias="invalidParams", title="Invalidparams")
    ] = None
    status: Annotated[int, Field(title="Status")]
    title: Annotated[str, Field(title="Title")]
    type: Annotated[str, Field(title="Type")]


class ProgressDocument(BaseModel):
    """
    How far a job is: steps whose output is checkpointed, of the steps its plan has.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    completed_steps: Annotated[
        int, Field(alias="completedSteps", title="Completedsteps")
    ]
    total_steps: Annotated[int, Field(alias="totalSteps", title="Totalsteps")]


class ReadyDocument(BaseModel):
    """
    What a Ready document's text is.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    bytes: Annotated[
        int, Field(description="The stored file's size in bytes.", title="Bytes")
    ]
    pages: Annotated[int | None, Field(title="Pages")]
    sha256: Annotated[
        str,
        Field(
            description="The extracted text's SHA-256 (hex); a job on the document records it.",
            title="Sha256",
        ),
    ]
    text_bytes: Annotated[
        int,
        Field(
            alias="textBytes",
            description="The extracted text's size in UTF-8 bytes: what a job reads.",
            title="Textbytes",
        ),
    ]


class ResultDocument(BaseModel):
    """
    The output of a Succeeded job.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    job_id: Annotated[str, Field(alias="jobId", title="Jobid")]
    operation: Annotated[
        Literal["summarize", "analyze", "classify", "extract"],
        Field(
            description="What the model is asked to do with the input.",
            title="Operation",
        ),
    ]
    output: Annotated[
        str | dict[str, Any],
        Field(
            description="The job's output: text (outputFormat `text`), or for extract the JSON object that matches the job's schema (outputFormat `json`).",
            title="Output",
        ),
    ]
    output_format: Annotated[
        Literal["text", "json"],
        Field(
            alias="outputFormat",
            description="`json` for extract, `text` for the other operations.",
            title="Outputformat",
        ),
    ]
    usage: UsageDocument | None


class StatusDocument(BaseModel):
    """
    Where a job stands; every submit, status and cancel answer carries one.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    attempts: Annotated[int, Field(title="Attempts")]
    cancel_requested_at: Annotated[
        AwareDatetime | None,
        Field(alias="cancelRequestedAt", title="Cancelrequestedat"),
    ]
    crashes: Annotated[int, Field(title="Crashes")]
    created_at: Annotated[AwareDatetime, Field(alias="createdAt", title="Createdat")]
    error: ErrorDocument | None
    expires_at: Annotated[AwareDatetime, Field(alias="expiresAt", title="Expiresat")]
    job_id: Annotated[str, Field(alias="jobId", title="Jobid")]
    operation: Annotated[
        Literal["summarize", "analyze", "classify", "extract"],
        Field(
            description="What the model is asked to do with the input.",
            title="Operation",
        ),
    ]
    progress: ProgressDocument
    reserved_tokens: Annotated[
        int | None, Field(alias="reservedTokens", title="Reservedtokens")
    ]
    result_url: Annotated[str | None, Field(alias="resultUrl", title="Resulturl")]
    revision: Annotated[int, Field(title="Revision")]
    status: Annotated[
        Literal[
            "Pending",
            "Running",
            "Succeeded",
            "Failed",
            "CancellationRequested",
            "Canceled",
        ],
        Field(
            description="The closed set of statuses a job can be in.", title="JobStatus"
        ),
    ]
    stream: Annotated[
        bool | None,
        Field(
            description="The output is streamed as it is written: GET /v1/jobs/{id}/output, or follow the job.",
            title="Stream",
        ),
    ] = False
    updated_at: Annotated[AwareDatetime, Field(alias="updatedAt", title="Updatedat")]
    usage: UsageDocument | None
    waiting_for: Annotated[
        Literal["provider_batch"] | None,
        Field(
            alias="waitingFor",
            description="What a Running job waits on while no worker holds it: `provider_batch` while its calls are in the provider's Batch API (tier `batch`); null otherwise.",
            title="Waitingfor",
        ),
    ] = None


class SubmitRequest(BaseModel):
    """
    The body of POST /v1/jobs.
    """

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
    )
    input: JobInputBody
    operation: Annotated[
        Literal["summarize", "analyze", "classify", "extract"],
        Field(
            description="What the model is asked to do with the input.",
            title="Operation",
        ),
    ]
    options: JobOptions | None = None


class TicketDocument(BaseModel):
    """
    The 201 body of POST /v1/realtime/tickets: a single-use ticket and the URL that carries it.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    expires_at: Annotated[AwareDatetime, Field(alias="expiresAt", title="Expiresat")]
    ticket: Annotated[str, Field(title="Ticket")]
    url: Annotated[str, Field(title="Url")]


class UploadForm(BaseModel):
    """
    An S3 presigned POST: send `fields` as form fields, then the file as the field `file`, to `url`.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    expires_at: Annotated[AwareDatetime, Field(alias="expiresAt", title="Expiresat")]
    fields: Annotated[dict[str, str], Field(title="Fields")]
    url: Annotated[str, Field(title="Url")]


class UsageDocument(BaseModel):
    """
    Tokens the model reported.
    """

    model_config = ConfigDict(
        populate_by_name=True,
    )
    cached_input_tokens: Annotated[
        int | None,
        Field(
            alias="cachedInputTokens",
            description="Of inputTokens, those the provider read from its prompt cache (billed at a discount).",
            title="Cachedinputtokens",
        ),
    ] = 0
    estimated: Annotated[
        bool | None,
        Field(
            description="True when part of it is outlast's estimate: a streamed call that ended without the provider's usage report (cut, or canceled) counts ceil(UTF-8 bytes / 4) per side.",
            title="Estimated",
        ),
    ] = False
    input_tokens: Annotated[int, Field(alias="inputTokens", title="Inputtokens")]
    output_tokens: Annotated[int, Field(alias="outputTokens", title="Outputtokens")]
    tiers: Annotated[
        list[Literal["standard", "flex", "batch"]] | None,
        Field(
            description="The tiers the job's calls ran at (a flex job that fell back shows both).",
            title="Tiers",
        ),
    ] = None
