"""The documents routes on the Powertools HTTP API resolver (the OpenAPI document comes from here)."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from functions.documents.dependencies import DocumentsDependencies
from shared.cursor import MAX_CURSOR_CHARS
from shared.documents.catalog import DocumentCatalog
from shared.documents.contract import (
    CreatedDocument,
    CreateDocumentRequest,
    DocumentPage,
    DocumentStatusDocument,
)
from shared.http import create_resolver, current_caller, json_response
from shared.ids import JOB_ID_PATTERN
from shared.openapi_responses import RETRY_AFTER, problem_responses
from shared.openapi_responses import json_response as json_entry

app = create_resolver()

DocumentIdPath = Annotated[str, Path(pattern=JOB_ID_PATTERN, description="The document id (a UUID).")]
_DOCUMENT_LOCATION = {"description": "Root-relative URL of the document.", "schema": {"type": "string"}}


def _deps() -> DocumentsDependencies:
    deps: DocumentsDependencies = app.context["deps"]
    return deps


def _catalog() -> DocumentCatalog:
    return _deps().catalog


@app.post(
    "/v1/documents",
    summary="Create a document and get its upload form",
    description=(
        "Records the document AwaitingUpload and answers an S3 presigned POST, good for 10 minutes, "
        "whose policy pins the key, the declared content type and a size of at most `bytes`: send "
        "`upload.fields` as form fields and then the file as the field `file` to `upload.url`. The "
        "document then moves to Ready (its text extracted) or Rejected with a stable code."
    ),
    operation_id="createDocument",
    tags=["documents"],
    responses={
        201: json_entry(
            "Created: upload the file with the form.",
            CreatedDocument,
            {"Location": {**_DOCUMENT_LOCATION, "required": True}},
        ),
        **problem_responses("invalid_request", "document_too_large", "unsupported_document_type"),
    },
)
def create(request: Annotated[CreateDocumentRequest, Body(embed=False)]) -> Response[Any]:
    """Create a document."""
    created = _catalog().create(current_caller(app), request)
    return json_response(201, created, {"Location": f"/v1/documents/{created.document_id}"})


@app.get(
    "/v1/documents/<document_id>",
    summary="Get a document",
    operation_id="getDocument",
    tags=["documents"],
    responses={
        200: json_entry(
            "The document; Retry-After while it awaits its upload or its text.",
            DocumentStatusDocument,
            {"Retry-After": RETRY_AFTER},
        ),
        **problem_responses("invalid_document_id", "document_not_found"),
    },
)
def get(document_id: DocumentIdPath) -> Response[Any]:
    """Where the caller's document stands."""
    document = _catalog().get(current_caller(app), document_id)
    settled = document.ready is not None or document.error is not None
    headers = {} if settled else {"Retry-After": str(_deps().settings.poll_after_seconds)}
    return json_response(200, document, headers)


@app.get(
    "/v1/documents",
    summary="List the caller's documents",
    operation_id="listDocuments",
    tags=["documents"],
    responses={
        200: json_entry("Newest first; a page may be short while nextCursor is set.", DocumentPage),
        **problem_responses("invalid_limit", "invalid_cursor", "invalid_query"),
    },
)
def list_(
    limit: Annotated[int, Query(ge=1, le=100, description="Items read per page.")] = 20,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR_CHARS, description="From nextCursor.")] = None,
) -> Response[Any]:
    """One page of the caller's documents."""
    return json_response(200, _catalog().list_page(current_caller(app), limit, cursor))


@app.delete(
    "/v1/documents/<document_id>",
    summary="Delete a document",
    description="Removes the document, its file and its text; 409 document_in_use while a job reads it.",
    operation_id="deleteDocument",
    tags=["documents"],
    responses={
        204: {"description": "Deleted."},
        **problem_responses("invalid_document_id", "document_not_found", "document_in_use"),
    },
)
def delete(document_id: DocumentIdPath) -> Response[Any]:
    """Delete the caller's document."""
    _catalog().delete(current_caller(app), document_id)
    return Response(204, None, "")
