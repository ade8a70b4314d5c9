"""Documents over the local stack (real HTTP, real JWTs, each function under its own role): the
owner creates, reads, lists and deletes; anyone else gets 404 everywhere (DESIGN.md, "Documents")."""

from __future__ import annotations

import uuid
from typing import Any

from tests.support.local_stack import RunningStack, assert_problem, unique

PDF = "application/pdf"


def _create(stack: RunningStack, token: str, **fields: Any) -> dict[str, Any]:
    body = {"filename": "report.pdf", "contentType": PDF, "bytes": 2048} | fields
    answer = stack.call("POST", "/v1/documents", token=token, body=body)
    assert answer.status == 201, answer.body
    assert answer.headers["location"] == f"/v1/documents/{answer.body['documentId']}"
    created: dict[str, Any] = answer.body
    return created


def test_the_owner_creates_reads_lists_and_deletes_a_document(stack: RunningStack) -> None:
    alice = stack.token(unique("docs-alice"), "docs")
    created = _create(stack, alice)
    document_id = created["documentId"]
    assert created["status"] == "AwaitingUpload"
    assert created["upload"]["fields"]["key"].endswith(f"/{document_id}/original")

    read = stack.call("GET", f"/v1/documents/{document_id}", token=alice)
    assert read.status == 200
    assert read.body["status"] == "AwaitingUpload"
    assert int(read.headers["retry-after"]) >= 1

    second = _create(stack, alice, filename="notes.md", contentType="text/markdown")["documentId"]
    page = stack.call("GET", "/v1/documents?limit=1", token=alice)
    assert [d["documentId"] for d in page.body["items"]] == [second]
    rest = stack.call("GET", f"/v1/documents?limit=1&cursor={page.body['nextCursor']}", token=alice)
    assert [d["documentId"] for d in rest.body["items"]] == [document_id]

    assert stack.call("DELETE", f"/v1/documents/{document_id}", token=alice).status == 204
    assert_problem(stack.call("GET", f"/v1/documents/{document_id}", token=alice), 404, "document_not_found")


def test_another_user_gets_404_everywhere(stack: RunningStack) -> None:
    alice = stack.token(unique("docs-owner"), "docs")
    bob = stack.token(unique("docs-other"), "docs")
    document_id = _create(stack, alice)["documentId"]

    for method in ("GET", "DELETE"):
        theirs = stack.call(method, f"/v1/documents/{document_id}", token=bob)
        missing = stack.call(method, f"/v1/documents/{uuid.uuid4()}", token=bob)
        assert_problem(theirs, 404, "document_not_found")
        assert_problem(missing, 404, "document_not_found")
    assert stack.call("GET", "/v1/documents", token=bob).body["items"] == []
    assert stack.call("GET", f"/v1/documents/{document_id}", token=alice).status == 200


def test_a_type_outside_the_list_is_415(stack: RunningStack) -> None:
    alice = stack.token(unique("docs-types"), "docs")
    answer = stack.call(
        "POST",
        "/v1/documents",
        token=alice,
        body={"filename": "a.png", "contentType": "image/png", "bytes": 9},
    )
    assert_problem(answer, 415, "unsupported_document_type")
