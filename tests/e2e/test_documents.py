"""Documents over the local stack (real HTTP, real JWTs, each function under its own role): the
owner creates, reads, lists and deletes; anyone else gets 404 everywhere (DESIGN.md, "Documents")."""

from __future__ import annotations

import re
import uuid

from outlast.uploads import UploadAnswer, post_upload
from tests.support import documents as files
from tests.support.local_documents import PDF, create_document, settled_document
from tests.support.local_stack import RunningStack, assert_problem, unique

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_the_owner_creates_reads_lists_and_deletes_a_document(stack: RunningStack) -> None:
    alice = stack.token(unique("docs-alice"), "docs")
    created = create_document(stack, alice)
    document_id = created["documentId"]
    assert created["status"] == "AwaitingUpload"
    assert created["upload"]["fields"]["key"].endswith(f"/{document_id}/original")

    read = stack.call("GET", f"/v1/documents/{document_id}", token=alice)
    assert read.status == 200
    assert read.body["status"] == "AwaitingUpload"
    assert int(read.headers["retry-after"]) >= 1

    second = create_document(stack, alice, filename="notes.md", contentType="text/markdown")["documentId"]
    page = stack.call("GET", "/v1/documents?limit=1", token=alice)
    assert [d["documentId"] for d in page.body["items"]] == [second]
    rest = stack.call("GET", f"/v1/documents?limit=1&cursor={page.body['nextCursor']}", token=alice)
    assert [d["documentId"] for d in rest.body["items"]] == [document_id]

    assert stack.call("DELETE", f"/v1/documents/{document_id}", token=alice).status == 204
    assert_problem(stack.call("GET", f"/v1/documents/{document_id}", token=alice), 404, "document_not_found")


def test_another_user_gets_404_everywhere(stack: RunningStack) -> None:
    alice = stack.token(unique("docs-owner"), "docs")
    bob = stack.token(unique("docs-other"), "docs")
    document_id = create_document(stack, alice)["documentId"]

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


# --- uploads: the presigned POST through local mode's S3 front, then the ingest ---------------------


def _upload(
    stack: RunningStack,
    token: str,
    data: bytes,
    content_type: str,
    *,
    declared: int | None = None,
    form: dict[str, str] | None = None,
) -> tuple[str, UploadAnswer]:
    """Create a document declaring `content_type` (and `declared` bytes), then POST `data` with its form
    (`form` overrides fields of it, as a client that tampers with the form would)."""
    created = create_document(stack, token, contentType=content_type, bytes=declared or len(data))
    fields = {**created["upload"]["fields"], **(form or {})}
    answer = post_upload(
        created["upload"]["url"], fields, filename="upload", data=data, content_type=content_type
    )
    return created["documentId"], answer


def _rejected(stack: RunningStack, token: str, document_id: str) -> str:
    document = settled_document(stack, token, document_id)
    assert document["status"] == "Rejected", document
    assert document["ready"] is None
    code: str = document["error"]["code"]
    return code


def test_a_multi_page_pdf_becomes_ready_with_its_text_facts(stack: RunningStack) -> None:
    alice = stack.token(unique("docs-pdf"), "docs")
    pages = files.numbered_pages(3)
    document_id, answer = _upload(stack, alice, files.pdf(pages), PDF)

    assert answer.ok, answer.body
    document = settled_document(stack, alice, document_id)
    assert document["status"] == "Ready", document
    assert document["ready"]["pages"] == 3
    assert document["ready"]["textBytes"] > sum(len(p) for p in pages) // 2
    assert re.fullmatch(r"[0-9a-f]{64}", document["ready"]["sha256"])


def test_docx_markdown_and_text_become_ready(stack: RunningStack) -> None:
    alice = stack.token(unique("docs-kinds"), "docs")
    uploads = [
        (files.docx(["First paragraph.", "Second paragraph."]), DOCX),
        (files.MARKDOWN.encode(), "text/markdown"),
        ("Plain notes, UTF-8: Grüße.\n".encode(), "text/plain"),
    ]
    for data, content_type in uploads:
        document_id, answer = _upload(stack, alice, data, content_type)
        assert answer.ok, answer.body
        document = settled_document(stack, alice, document_id)
        assert document["status"] == "Ready", (content_type, document)
        assert document["ready"]["pages"] is None
        assert document["ready"]["bytes"] == len(data)


def test_hostile_or_unusable_files_end_rejected_with_their_code(stack: RunningStack) -> None:
    alice = stack.token(unique("docs-hostile"), "docs")
    cases = [
        (files.pdf(["secret"], password="pw"), PDF, "document_encrypted"),
        (files.pdf([None, None]), PDF, "document_has_no_text"),
        (files.docx(["not a pdf at all"]), PDF, "unsupported_type"),  # the type lies about the bytes
        (files.pdf(["a pdf"]), "text/plain", "unsupported_type"),
        (files.docx_bomb(100 * 1024 * 1024), DOCX, "document_too_large"),
    ]
    for data, content_type, code in cases:
        document_id, answer = _upload(stack, alice, data, content_type)
        assert answer.ok, answer.body
        assert _rejected(stack, alice, document_id) == code, content_type


def test_uploads_outside_the_policy_are_refused_and_store_nothing(stack: RunningStack) -> None:
    alice = stack.token(unique("docs-policy"), "docs")
    data = files.MARKDOWN.encode()

    too_large, answer = _upload(stack, alice, data + b"more", "text/markdown", declared=len(data))
    assert answer.status == 400
    assert b"<Code>EntityTooLarge</Code>" in answer.body

    other_key = f"documents/docs/someone-else/{uuid.uuid4()}/original"
    elsewhere, answer = _upload(stack, alice, data, "text/markdown", form={"key": other_key})
    assert answer.status == 403
    assert b"<Code>AccessDenied</Code>" in answer.body

    retyped, answer = _upload(stack, alice, data, "text/markdown", form={"Content-Type": "text/plain"})
    assert answer.status == 403

    forged, answer = _upload(stack, alice, data, "text/markdown", form={"x-amz-signature": "0" * 64})
    assert answer.status == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in answer.body

    bucket = stack.state["outputs"]["DocumentsBucketName"]
    s3 = stack.aws("s3")
    for document_id in (too_large, elsewhere, retyped, forged):
        read = stack.call("GET", f"/v1/documents/{document_id}", token=alice)
        assert read.body["status"] == "AwaitingUpload"
    stored = s3.list_objects_v2(Bucket=bucket, Prefix="documents/docs/someone-else/")
    assert stored.get("KeyCount", 0) == 0


def test_another_user_cannot_read_a_ready_document(stack: RunningStack) -> None:
    alice = stack.token(unique("docs-ready-owner"), "docs")
    bob = stack.token(unique("docs-ready-other"), "docs")
    document_id, _ = _upload(stack, alice, files.MARKDOWN.encode(), "text/markdown")
    assert settled_document(stack, alice, document_id)["status"] == "Ready"

    for method in ("GET", "DELETE"):
        assert_problem(
            stack.call(method, f"/v1/documents/{document_id}", token=bob), 404, "document_not_found"
        )
    assert document_id not in [
        d["documentId"] for d in stack.call("GET", "/v1/documents", token=bob).body["items"]
    ]
