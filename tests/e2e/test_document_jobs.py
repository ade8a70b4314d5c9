"""Jobs on documents over the local stack: the text a document's upload yielded is the input; a
replayed submit is the same job; deleting a document a job reads is 409 and the job succeeds; the
pin keeps the document (its record's TTL) until the job's own expiry, under the submit's role;
another user's submit is 404; a document still ingesting is 409 with Retry-After; extract on a
document (DESIGN.md, "Documents"; issue 26 asks extract to work on documents)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from infra.names import DOCUMENTS_TABLE
from outlast.uploads import post_upload
from shared.adapters.dynamodb_documents import DynamoDocumentRepository
from shared.clock import from_iso
from shared.job import Caller
from tests.support import documents as files
from tests.support.local_documents import create_document, settled_document
from tests.support.local_stack import (
    RunningStack,
    assert_problem,
    assert_retry_after,
    new_key,
    token_claims,
    unique,
)

MARKDOWN = "text/markdown"
INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {"vendor": {"type": "string"}, "total": {"type": "number"}},
    "required": ["vendor", "total"],
    "additionalProperties": False,
}


def _ready_document(stack: RunningStack, token: str, text: str) -> str:
    data = text.encode()
    created = create_document(stack, token, filename="notes.md", contentType=MARKDOWN, bytes=len(data))
    upload = created["upload"]
    answer = post_upload(
        upload["url"], upload["fields"], filename="notes.md", data=data, content_type=MARKDOWN
    )
    assert answer.ok, answer.body
    document = settled_document(stack, token, created["documentId"])
    assert document["status"] == "Ready", document
    document_id: str = created["documentId"]
    return document_id


def _on(document_id: str, operation: str = "summarize", **options: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"operation": operation, "input": {"documentId": document_id}}
    if options:
        body["options"] = options
    return body


def _deletable(stack: RunningStack, token: str, document_id: str, timeout_seconds: float = 30) -> None:
    """Delete once the job's terminal write has unpinned the document (the notifier's part)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        answer = stack.call("DELETE", f"/v1/documents/{document_id}", token=token)
        if answer.status == 204:
            return
        assert_problem(answer, 409, "document_in_use")
        assert time.monotonic() < deadline, "the document stayed pinned after its job ended"
        time.sleep(0.2)


def test_a_job_on_a_document_summarizes_its_text_and_a_replay_is_the_same_job(stack: RunningStack) -> None:
    alice = stack.token(unique("docjobs-alice"), "docjobs")
    document_id = _ready_document(stack, alice, files.MARKDOWN)
    key = new_key()

    accepted = stack.submit(alice, _on(document_id), key=key)
    assert accepted.status == 202, accepted.body
    replayed = stack.submit(alice, _on(document_id), key=key)
    assert replayed.status == 202
    assert replayed.headers.get("idempotent-replayed") == "true"
    assert replayed.body["jobId"] == accepted.body["jobId"]

    job = stack.wait_terminal(accepted.body["jobId"], alice)
    assert job["status"] == "Succeeded", job
    result = stack.call("GET", f"/v1/jobs/{job['jobId']}/result", token=alice)
    assert result.body["output"]
    _deletable(stack, alice, document_id)


def test_deleting_a_document_a_job_reads_is_409_and_the_job_succeeds(stack: RunningStack) -> None:
    alice = stack.token(unique("docjobs-pinned"), "docjobs")
    document_id = _ready_document(stack, alice, "A slow report to read. [[delay:2]]\n")
    job_id = stack.submit(alice, _on(document_id)).body["jobId"]

    refused = stack.call("DELETE", f"/v1/documents/{document_id}", token=alice)
    assert_problem(refused, 409, "document_in_use")

    assert stack.wait_terminal(job_id, alice)["status"] == "Succeeded"
    _deletable(stack, alice, document_id)
    assert_problem(stack.call("GET", f"/v1/documents/{document_id}", token=alice), 404, "document_not_found")


def test_the_pin_keeps_the_document_until_the_jobs_expiry(stack: RunningStack) -> None:
    """The submit's pin (its role's UpdateItem, enforced) raised the record's keptUntil and TTL
    to the job's expiresAt; the job's end unpins it and leaves both (never shortened)."""
    alice = stack.token(unique("docjobs-kept"), "docjobs")
    document_id = _ready_document(stack, alice, "A report that must outlive its retention.\n")
    job = stack.wait_terminal(stack.submit(alice, _on(document_id)).body["jobId"], alice)
    assert job["status"] == "Succeeded"
    dynamodb = stack.aws("dynamodb")
    [table] = [name for name in dynamodb.list_tables()["TableNames"] if DOCUMENTS_TABLE in name]
    documents = DynamoDocumentRepository(dynamodb, table)
    owner = Caller(tenant="docjobs", sub=token_claims(alice)["sub"])

    deadline = time.monotonic() + 30
    while (stored := documents.get(owner, document_id)) is not None and stored.pinned_by:
        assert time.monotonic() < deadline, "the document stayed pinned after its job ended"
        time.sleep(0.2)  # the notifier's unpin follows the terminal write

    assert stored is not None
    assert stored.kept_until == from_iso(job["expiresAt"])
    assert stored.lives_until >= stored.expires_at
    _deletable(stack, alice, document_id)


def test_another_user_cannot_run_a_job_on_a_document(stack: RunningStack) -> None:
    alice = stack.token(unique("docjobs-owner"), "docjobs")
    bob = stack.token(unique("docjobs-other"), "docjobs")
    document_id = _ready_document(stack, alice, files.MARKDOWN)

    assert_problem(stack.submit(bob, _on(document_id)), 404, "document_not_found")
    assert_problem(stack.submit(alice, _on(str(uuid.uuid4()))), 404, "document_not_found")
    assert stack.call("GET", "/v1/jobs", token=bob).body["items"] == []


def test_a_document_still_awaiting_its_upload_is_409_with_retry_after(stack: RunningStack) -> None:
    alice = stack.token(unique("docjobs-early"), "docjobs")
    document_id = create_document(stack, alice, contentType=MARKDOWN)["documentId"]
    key = new_key()

    early = stack.submit(alice, _on(document_id), key=key)
    assert_problem(early, 409, "document_not_ready")
    assert assert_retry_after(early) >= 1
    both = {"operation": "summarize", "input": {"text": "x", "documentId": document_id}}
    assert_problem(stack.submit(alice, both), 400, "invalid_request")


def test_extract_with_a_schema_on_a_document_succeeds(stack: RunningStack) -> None:
    alice = stack.token(unique("docjobs-extract"), "docjobs")
    document_id = _ready_document(stack, alice, "Invoice from Acme Tools, total 1250 EUR, paid.\n")

    accepted = stack.submit(alice, _on(document_id, "extract", schema=INVOICE))
    assert accepted.status == 202, accepted.body
    job = stack.wait_terminal(accepted.body["jobId"], alice, timeout_seconds=120)

    assert job["status"] == "Succeeded", job
    output = stack.call("GET", f"/v1/jobs/{job['jobId']}/result", token=alice).body["output"]
    assert set(output) == {"vendor", "total"}
    assert json.dumps(output)


def test_a_300_page_pdf_is_summarized_in_steps_with_progress(stack: RunningStack) -> None:
    alice = stack.token(unique("docjobs-long"), "docjobs")
    data = files.pdf(files.numbered_pages(300, words_per_page=60))
    created = create_document(
        stack, alice, filename="long.pdf", contentType="application/pdf", bytes=len(data)
    )
    upload = created["upload"]
    answer = post_upload(
        upload["url"], upload["fields"], filename="long.pdf", data=data, content_type="application/pdf"
    )
    assert answer.ok, answer.body
    document = settled_document(stack, alice, created["documentId"])
    assert document["ready"]["pages"] == 300

    job_id = stack.submit(alice, _on(created["documentId"])).body["jobId"]
    job = stack.wait_terminal(job_id, alice, timeout_seconds=180)

    assert job["status"] == "Succeeded", job
    assert job["progress"]["totalSteps"] > 1
    assert job["progress"]["completedSteps"] == job["progress"]["totalSteps"]
