"""OpenAPI response declarations: problem+json answers and the headers of the contract."""

from __future__ import annotations

from typing import Any, cast

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from shared.contract import GatewayMessage, Problem
from shared.problems import PROBLEM_CONTENT_TYPE, PROBLEMS

_INTEGER_SECONDS = {"type": "integer", "minimum": 1}
RETRY_AFTER = {"description": "Delta-seconds to wait before polling again.", "schema": _INTEGER_SECONDS}
LOCATION = {"description": "Root-relative URL of the job.", "schema": {"type": "string"}}
REPLAYED = {
    "description": "Present (true) when this answer replays an earlier submit with the same key.",
    "schema": {"type": "string", "enum": ["true"]},
}


def json_response(
    description: str, model: type[BaseModel], headers: dict[str, Any] | None = None
) -> OpenAPIResponse:
    """A JSON response entry whose schema is a response model."""
    entry: dict[str, Any] = {"description": description, "content": {"application/json": {"model": model}}}
    if headers:
        entry["headers"] = headers
    return cast(OpenAPIResponse, entry)


# Every route can answer these: no identity, a body that is too large or not JSON (any route may
# be sent one), or a failure on our side.
_ALWAYS = (
    "unauthorized",
    "invalid_json",
    "request_too_large",
    "unsupported_media_type",
    "internal_error",
    "service_unavailable",
)
# What API Gateway itself answers on any route, as plain `{"message": ...}` JSON.
_GATEWAY_ANSWERS = {
    401: "the JWT authorizer refused the token",
    413: "the body is over API Gateway's 10 MB",
    429: "API Gateway throttled the request (no Retry-After)",
    500: "the function failed",
    503: "the function timed out",
}


def problem_responses(*codes: str) -> dict[int, OpenAPIResponse]:
    """Response entries for a route's problem codes (plus the ones every route has), by status."""
    by_status: dict[int, list[str]] = {status: [] for status in _GATEWAY_ANSWERS}
    for code in dict.fromkeys((*codes, *_ALWAYS)):
        by_status.setdefault(PROBLEMS[code].status, []).append(code)
    responses: dict[int, OpenAPIResponse] = {}
    for status, status_codes in sorted(by_status.items()):
        parts: list[str] = []
        content: dict[str, Any] = {}
        if status_codes:
            parts.append("Problem: " + ", ".join(sorted(status_codes)))
            content[PROBLEM_CONTENT_TYPE] = {"model": Problem}
        if status in _GATEWAY_ANSWERS:
            parts.append(f"application/json from API Gateway when {_GATEWAY_ANSWERS[status]}")
            content["application/json"] = {"model": GatewayMessage}
        entry: dict[str, Any] = {"description": ". ".join(parts), "content": content}
        if "rate_limited" in status_codes:
            entry["headers"] = {"Retry-After": {**RETRY_AFTER, "required": True}}
        elif "service_unavailable" in status_codes:
            # Present on the functions' own 503s; API Gateway's 503 carries none.
            entry["headers"] = {"Retry-After": RETRY_AFTER}
        responses[status] = cast(OpenAPIResponse, entry)
    return responses
