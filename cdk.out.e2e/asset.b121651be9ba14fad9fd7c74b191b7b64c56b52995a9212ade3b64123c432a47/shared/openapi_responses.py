"""OpenAPI response declarations: problem+json answers and the headers of the contract."""

from __future__ import annotations

from typing import Any, cast

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from shared.contract import Problem
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


# Every route can answer these: no identity, or a failure on our side.
_ALWAYS = ("unauthorized", "internal_error", "service_unavailable")


def problem_responses(*codes: str) -> dict[int, OpenAPIResponse]:
    """Response entries for a route's problem codes (plus the ones every route has), by status."""
    by_status: dict[int, list[str]] = {}
    for code in (*codes, *_ALWAYS):
        by_status.setdefault(PROBLEMS[code].status, []).append(code)
    responses: dict[int, OpenAPIResponse] = {}
    for status, status_codes in sorted(by_status.items()):
        entry: dict[str, Any] = {
            "description": "Problem: " + ", ".join(sorted(status_codes)),
            "content": {PROBLEM_CONTENT_TYPE: {"model": Problem}},
        }
        if status == 429:
            entry["headers"] = {"Retry-After": RETRY_AFTER}
        responses[status] = cast(OpenAPIResponse, entry)
    return responses
