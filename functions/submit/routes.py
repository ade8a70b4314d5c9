"""The submit route on the Powertools HTTP API resolver (validation on, OpenAPI from these types)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header

from functions.submit.dependencies import SubmitDependencies
from functions.submit.service import submit_job
from shared import budgets
from shared.contract import StatusDocument, SubmitRequest
from shared.http import create_resolver, current_caller, json_response
from shared.idempotency import parse_idempotency_key
from shared.openapi_responses import (
    LOCATION,
    REPLAYED,
    RETRY_AFTER,
    problem_responses,
)
from shared.openapi_responses import (
    json_response as json_entry,
)

app = create_resolver()

IdempotencyKeyHeader = Annotated[
    str,
    Header(
        alias="idempotency-key",
        description="1-255 visible ASCII characters; one pair of surrounding double quotes is stripped.",
        min_length=1,
        max_length=257,
        pattern=r'^(?:"[!-~]{1,255}"|[!-~]{1,255})$',
    ),
]


@app.post(
    "/v1/jobs",
    summary="Submit a job",
    description=(
        "Accepts work for the model and answers at once; poll the Location for its status. When the "
        "caller's tenant has a monthly token budget, the job first reserves its upper bound of tokens "
        "(403 budget_exceeded when it does not fit); the reservation is settled to the tokens used "
        "when the job ends. With input.documentId the caller's Ready document's text is the input "
        "(404 document_not_found, 409 document_not_ready with Retry-After while it ingests), and the "
        "document cannot be deleted until the job ends."
    ),
    operation_id="submitJob",
    tags=["jobs"],
    responses={
        202: json_entry(
            "Accepted (or, with Idempotent-Replayed: true, the same job as before).",
            StatusDocument,
            {
                "Location": {**LOCATION, "required": True},
                "Retry-After": {**RETRY_AFTER, "required": True},
                "Idempotent-Replayed": REPLAYED,
            },
        ),
        **problem_responses(
            "invalid_request",
            "invalid_json",
            "model_not_allowed",
            "invalid_schema",
            "tier_unavailable",
            "missing_idempotency_key",
            "invalid_idempotency_key",
            "idempotency_key_reused",
            "input_too_large",
            "request_too_large",
            "unsupported_media_type",
            "rate_limited",
            "budget_exceeded",
            "document_not_found",
            "document_not_ready",
        ),
    },
)
def submit(
    request: Annotated[SubmitRequest, Body(embed=False)], idempotency_key: IdempotencyKeyHeader
) -> Response[Any]:
    """Submit a job."""
    deps: SubmitDependencies = app.context["deps"]
    caller = current_caller(app)
    outcome = submit_job(deps, caller, request, parse_idempotency_key(idempotency_key))
    headers = {
        "Location": f"/v1/jobs/{outcome.job.job_id}",
        "Retry-After": str(deps.settings.poll_after_seconds),
    }
    if outcome.replayed:
        headers["Idempotent-Replayed"] = "true"
    return json_response(202, budgets.document(deps.budgets, outcome.job), headers)
