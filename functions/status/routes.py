"""Status, result, list and cancel routes on the Powertools HTTP API resolver."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from functions.status.dependencies import StatusDependencies
from functions.status.service import cancel_job, get_job, get_output, get_result, list_jobs
from shared import budgets
from shared.contract import JobPage, OutputPage, ResultDocument, StatusDocument
from shared.cursor import MAX_CURSOR_CHARS
from shared.http import create_resolver, current_caller, json_response
from shared.ids import JOB_ID_PATTERN
from shared.lifecycle import JobStatus
from shared.openapi_responses import RETRY_AFTER, problem_responses
from shared.openapi_responses import json_response as json_entry
from shared.output import CURSOR_PATTERN, DEFAULT_PAGE_EVENTS, MAX_PAGE_EVENTS, START, OutputCursor

app = create_resolver()

JobIdPath = Annotated[str, Path(pattern=JOB_ID_PATTERN, description="The job id (a UUID).")]


def _deps() -> StatusDependencies:
    deps: StatusDependencies = app.context["deps"]
    return deps


def _poll_headers(document: StatusDocument) -> dict[str, str]:
    if document.status in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELED}:
        return {}
    return {"Retry-After": str(_deps().settings.poll_after_seconds)}


def _status_content(description: str) -> OpenAPIResponse:
    return json_entry(description, StatusDocument, {"Retry-After": RETRY_AFTER})


@app.get(
    "/v1/jobs/<job_id>",
    summary="Get a job's status",
    operation_id="getJob",
    tags=["jobs"],
    responses={
        200: _status_content("The status document; Retry-After while the job is not terminal."),
        **problem_responses("invalid_job_id", "job_not_found"),
    },
)
def status(job_id: JobIdPath) -> Response[Any]:
    """Where the caller's job stands."""
    deps = _deps()
    document = budgets.document(deps.budgets, get_job(deps, current_caller(app), job_id.lower()))
    return json_response(200, document, _poll_headers(document))


@app.get(
    "/v1/jobs/<job_id>/result",
    summary="Get a job's result",
    operation_id="getJobResult",
    tags=["jobs"],
    responses={
        200: json_entry("The output.", ResultDocument),
        **problem_responses("invalid_job_id", "job_not_found", "job_not_succeeded"),
    },
)
def result(job_id: JobIdPath) -> Response[Any]:
    """The output of the caller's Succeeded job."""
    return json_response(200, get_result(_deps(), current_caller(app), job_id.lower()))


@app.get(
    "/v1/jobs/<job_id>/output",
    summary="Read a job's streamed output",
    description=(
        "The output events of a job submitted with options.stream, after a cursor, in (attempt, seq) "
        "order: each attempt's events join to the text it streamed, and a newer attempt's text replaces "
        "an older one's. Once the job has ended, show resultAttempt's text. A job that does not stream "
        "has no events."
    ),
    operation_id="getJobOutput",
    tags=["jobs"],
    responses={
        200: json_entry(
            "Events after the cursor; complete once the job has ended and none are left.", OutputPage
        ),
        **problem_responses(
            "invalid_job_id", "job_not_found", "invalid_cursor", "invalid_limit", "invalid_query"
        ),
    },
)
def output(
    job_id: JobIdPath,
    after: Annotated[
        str | None,
        Query(pattern=CURSOR_PATTERN, description="ATTEMPT.SEQ: events after this one (from nextCursor)."),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_PAGE_EVENTS, description="Events per page.")
    ] = DEFAULT_PAGE_EVENTS,
) -> Response[Any]:
    """The caller's job's output events."""
    cursor = OutputCursor.parse(after) if after is not None else START
    return json_response(200, get_output(_deps(), current_caller(app), job_id.lower(), cursor, limit))


@app.post(
    "/v1/jobs/<job_id>/cancellation",
    summary="Cancel a job",
    operation_id="cancelJob",
    tags=["jobs"],
    responses={
        200: _status_content("Canceled (it was Pending, or already Canceled)."),
        202: _status_content("CancellationRequested: the worker stops at its next check."),
        **problem_responses("invalid_job_id", "job_not_found", "job_not_cancelable"),
    },
)
def cancel(job_id: JobIdPath) -> Response[Any]:
    """Cancel the caller's job."""
    deps = _deps()
    outcome = cancel_job(deps, current_caller(app), job_id.lower())
    document = budgets.document(deps.budgets, outcome.job)
    return json_response(202 if outcome.in_progress else 200, document, _poll_headers(document))


@app.get(
    "/v1/jobs",
    summary="List the caller's jobs",
    operation_id="listJobs",
    tags=["jobs"],
    responses={
        200: json_entry("Newest first; a page may be short while nextCursor is set.", JobPage),
        **problem_responses("invalid_status", "invalid_limit", "invalid_cursor", "invalid_query"),
    },
)
def list_(
    status: Annotated[JobStatus | None, Query(description="Only jobs in this status.")] = None,
    limit: Annotated[int, Query(ge=1, le=100, description="Items read per page.")] = 20,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR_CHARS, description="From nextCursor.")] = None,
) -> Response[Any]:
    """One page of the caller's jobs."""
    return json_response(200, list_jobs(_deps(), current_caller(app), status, limit, cursor))
