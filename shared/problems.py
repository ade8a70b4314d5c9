"""The one place that maps errors to HTTP: status, title and an RFC 9457 problem+json body."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shared import errors
from shared.contract import InvalidParam, Problem

PROBLEM_CONTENT_TYPE = "application/problem+json"


@dataclass(frozen=True)
class ProblemSpec:
    """How one stable error code is answered."""

    status: int
    title: str


# Every code a function can answer with. The OpenAPI document lists them per route.
PROBLEMS: dict[str, ProblemSpec] = {
    "invalid_request": ProblemSpec(400, "The request body is not valid"),
    "invalid_json": ProblemSpec(400, "The request body is not valid JSON"),
    "model_not_allowed": ProblemSpec(400, "The model is not allowed"),
    "invalid_schema": ProblemSpec(400, "The schema is outside the supported subset"),
    "tier_unavailable": ProblemSpec(400, "The tier is not available for this model"),
    "missing_idempotency_key": ProblemSpec(400, "Idempotency-Key is required"),
    "invalid_idempotency_key": ProblemSpec(400, "Idempotency-Key is not valid"),
    "invalid_job_id": ProblemSpec(400, "The job id is not a UUID"),
    "invalid_status": ProblemSpec(400, "The status filter is not valid"),
    "invalid_limit": ProblemSpec(400, "The limit is not valid"),
    "invalid_cursor": ProblemSpec(400, "The cursor is not valid"),
    "invalid_query": ProblemSpec(400, "The query is not valid"),
    "unauthorized": ProblemSpec(401, "Authentication is required"),
    "budget_exceeded": ProblemSpec(403, "The tenant's token budget is exhausted"),
    "invalid_document_id": ProblemSpec(400, "The document id is not a UUID"),
    "job_not_found": ProblemSpec(404, "Job not found"),
    "document_not_found": ProblemSpec(404, "Document not found"),
    "document_in_use": ProblemSpec(409, "The document is in use"),
    "document_not_ready": ProblemSpec(409, "The document is not ready"),
    "document_too_large": ProblemSpec(413, "The document is too large"),
    "unsupported_document_type": ProblemSpec(415, "The document type is not supported"),
    "route_not_found": ProblemSpec(404, "No such route"),
    "idempotency_key_reused": ProblemSpec(409, "Idempotency-Key was used with another request"),
    "job_not_succeeded": ProblemSpec(409, "The job has no result"),
    "job_not_cancelable": ProblemSpec(409, "The job can no longer be canceled"),
    "input_too_large": ProblemSpec(413, "The input is too large"),
    "request_too_large": ProblemSpec(413, "The request body is too large"),
    "unsupported_media_type": ProblemSpec(415, "The request body must be application/json"),
    "rate_limited": ProblemSpec(429, "Too many submits"),
    "internal_error": ProblemSpec(500, "Internal error"),
    "service_unavailable": ProblemSpec(503, "Service temporarily unavailable"),
}

_DETAILS: dict[str, str] = {
    "invalid_json": "The body could not be parsed as JSON.",
    "invalid_request": "The body does not match the schema; see invalidParams.",
    "invalid_job_id": "Job ids are UUIDs.",
    "invalid_document_id": "Document ids are UUIDs.",
    "invalid_status": (
        "status must be one of Pending, Running, Succeeded, Failed, CancellationRequested, Canceled."
    ),
    "invalid_limit": "limit must be an integer from 1 to 100 (to 1000 for a job's output).",
    "invalid_cursor": "The cursor is not valid for this request.",
    "invalid_query": "The query string is not valid; see invalidParams.",
    "input_too_large": "input.text is over 1,048,576 UTF-8 bytes.",
    "request_too_large": "The request body is over 1.5 MiB.",
    "unsupported_media_type": "Send the body as application/json.",
    "route_not_found": "There is no such route.",
    "internal_error": "Something went wrong on our side; retry, or report the correlation id.",
    "missing_idempotency_key": "The Idempotency-Key header is required.",
    "invalid_idempotency_key": "Idempotency-Key must be 1-255 visible ASCII characters (0x21-0x7E).",
}


def problem_body(
    code: str,
    correlation_id: str,
    detail: str | None = None,
    invalid_params: Sequence[InvalidParam] | None = None,
) -> tuple[int, dict[str, Any]]:
    """The status and problem document for a stable code."""
    spec = PROBLEMS[code]
    problem = Problem(
        type=f"urn:outlast:problem:{code}",
        title=spec.title,
        status=spec.status,
        detail=detail or _DETAILS.get(code, spec.title + "."),
        code=code,
        correlation_id=correlation_id,
        invalid_params=list(invalid_params) if invalid_params else None,
    )
    return spec.status, problem.model_dump(mode="json", by_alias=True, exclude_none=True)


def problem_for_error(error: errors.OutlastError, correlation_id: str) -> tuple[int, dict[str, Any]]:
    """The problem document of a domain error; its detail is caller-safe by construction."""
    code = error.code if error.code in PROBLEMS else "internal_error"
    detail = error.detail if code != "internal_error" else None
    return problem_body(code, correlation_id, detail)


# --- Request validation errors (pydantic, through the Powertools resolver) -----------------

# (location, parameter) -> code, checked in this order: headers before the body, as a server reads.
_PARAMETER_CODES: dict[tuple[str, str], str] = {
    ("path", "job_id"): "invalid_job_id",
    ("path", "document_id"): "invalid_document_id",
    ("query", "status"): "invalid_status",
    ("query", "limit"): "invalid_limit",
    ("query", "cursor"): "invalid_cursor",
    ("query", "after"): "invalid_cursor",  # GET /v1/jobs/{id}/output?after=ATTEMPT.SEQ
}
_SIZE_ERROR_TYPES = frozenset({"input_too_large"})


def _field_name(error: dict[str, Any]) -> str:
    location = error["loc"]
    if not location or error["type"] == "json_invalid":  # a JSON error's location is a byte offset
        return "body"
    return ".".join(str(part) for part in location[1:]) or str(location[0])


def code_for_validation_errors(validation_errors: Sequence[dict[str, Any]]) -> str:
    """The one stable code that best describes a set of pydantic errors."""
    kinds = [(str(e["loc"][0]) if e["loc"] else "body", e) for e in validation_errors]
    for where, error in kinds:
        if where == "header":
            # An empty header is as good as none (the IETF draft: the key is required).
            empty = error["type"] == "string_too_short" and not error.get("input")
            return (
                "missing_idempotency_key"
                if error["type"] == "missing" or empty
                else "invalid_idempotency_key"
            )
    for where, error in kinds:
        name = str(error["loc"][1]) if len(error["loc"]) > 1 else ""
        if (where, name) in _PARAMETER_CODES:
            return _PARAMETER_CODES[(where, name)]
        if where == "query":
            return "invalid_query"
    types = {error["type"] for _, error in kinds}
    if "json_invalid" in types:
        return "invalid_json"
    if types & _SIZE_ERROR_TYPES:
        return "input_too_large"
    return "invalid_request"


def invalid_params(validation_errors: Sequence[dict[str, Any]]) -> list[InvalidParam]:
    """Which fields were wrong and how, by location and error type: never the values themselves."""
    return [InvalidParam(name=_field_name(e), reason=str(e["type"])) for e in validation_errors]
