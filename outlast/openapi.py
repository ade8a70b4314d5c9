"""The OpenAPI document of the HTTP API, generated from the route code (`make openapi`)."""

from __future__ import annotations

import json
import sys
from typing import Any

TITLE = "outlast"
VERSION = "1.0.0"
DESCRIPTION = (
    "Durable LLM jobs: submit with an Idempotency-Key, poll the status URL (or follow live updates "
    "over the WebSocket a ticket opens), fetch the result; GET /v1/budget shows the tenant's "
    "monthly token budget. "
    "Every route needs a Cognito ID token (Authorization: Bearer). Errors are "
    "application/problem+json (RFC 9457) with a stable `code`."
)


def build_document() -> dict[str, Any]:
    """Merge the schemas of every API function's resolver into one document."""
    from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge  # noqa: PLC0415
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer  # noqa: PLC0415

    from functions.budget.routes import app as budget_app  # noqa: PLC0415
    from functions.status.routes import app as status_app  # noqa: PLC0415
    from functions.submit.routes import app as submit_app  # noqa: PLC0415
    from functions.tickets.routes import app as tickets_app  # noqa: PLC0415

    merge = OpenAPIMerge(
        title=TITLE,
        version=VERSION,
        description=DESCRIPTION,
        security_schemes={"cognitoIdToken": HTTPBearer(bearerFormat="JWT")},
        security=[{"cognitoIdToken": []}],
        on_conflict="error",
    )
    for app in (submit_app, status_app, tickets_app, budget_app):
        merge.add_schema(
            app.get_openapi_schema(title=TITLE, version=VERSION).model_dump(by_alias=True, exclude_none=True)
        )
    document: dict[str, Any] = json.loads(merge.get_openapi_json_schema())
    return _without_unreachable_422(document)


def _without_unreachable_422(document: dict[str, Any]) -> dict[str, Any]:
    """Drop the 422 answers Powertools documents for every validated route.

    shared.http maps validation failures to 400/413 problem+json, so a 422 is never sent; a
    documented status the code never returns would mislead clients and fuzzers.
    """
    for path_item in document.get("paths", {}).values():
        for operation in path_item.values():
            operation.get("responses", {}).pop("422", None)
    schemas = document.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(unused, None)
    return document


def render() -> str:
    """The committed form: sorted keys, two-space indent, trailing newline."""
    return json.dumps(build_document(), indent=2, sort_keys=True) + "\n"


def main() -> None:
    """Print the document (make openapi redirects it into docs/openapi.json)."""
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
