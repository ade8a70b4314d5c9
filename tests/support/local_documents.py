"""Documents over a running local stack, as a client makes them: create, then wait until settled."""

from __future__ import annotations

import time
from typing import Any

from tests.support.local_stack import RunningStack

PDF = "application/pdf"


def create_document(stack: RunningStack, token: str, **fields: Any) -> dict[str, Any]:
    """POST /v1/documents (a 2 KB PDF unless `fields` say otherwise); its 201 body."""
    body = {"filename": "report.pdf", "contentType": PDF, "bytes": 2048} | fields
    answer = stack.call("POST", "/v1/documents", token=token, body=body)
    assert answer.status == 201, answer.body
    assert answer.headers["location"] == f"/v1/documents/{answer.body['documentId']}"
    created: dict[str, Any] = answer.body
    return created


def settled_document(
    stack: RunningStack, token: str, document_id: str, timeout_seconds: float = 60
) -> dict[str, Any]:
    """The document once Ready or Rejected (polled as a client would)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        read = stack.call("GET", f"/v1/documents/{document_id}", token=token)
        assert read.status == 200, read.body
        if read.body["status"] != "AwaitingUpload":
            document: dict[str, Any] = read.body
            return document
        assert time.monotonic() < deadline, f"{document_id} still awaits its upload"
        time.sleep(0.2)
