"""Submit latency on a document: an 8 MiB document's text against 1 MiB of inline text.

Through the submit's real handler against moto, under its role: a job on a document reads the
document (one GetItem), its text (one S3 GET of up to `maxExtractedBytes`), plans and stores it as
its input (in the payload bucket), pins the document, then writes the job; a job on inline text
does the same without the two reads and the pin. The Ready document is written straight into
moto (its item and its text object, as the ingest leaves them), so only the submit is timed.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from outlast.bench.events import SAMPLE_TENANT, submit_event
from outlast.bench.harness import Harness
from outlast.bench.stats import summary
from outlast.documents import long_document
from shared.adapters.dynamodb_documents import DynamoDocumentRepository
from shared.adapters.s3_documents import S3DocumentObjects
from shared.contract import MAX_INPUT_TEXT_BYTES
from shared.documents.extraction import MIB
from shared.documents.record import DocumentRecord, ReadyFacts, Upload
from shared.documents.types import ContentType, DocumentStatus
from shared.ids import new_document_id, new_sequence_id
from shared.job import Caller


def _ready_document(h: Harness, owner: Caller, text: bytes) -> str:
    """A Ready document with this text, as the ingest would have left it."""
    table = next(
        name for lid, name in h.resources.tables.items() if lid.startswith("DocumentsDocumentsTable")
    )
    bucket = next(
        name for lid, name in h.resources.buckets.items() if lid.startswith("DocumentsDocumentsBucket")
    )
    now = datetime.now(UTC).replace(microsecond=0)
    sha256 = hashlib.sha256(text).hexdigest()
    document = DocumentRecord(
        document_id=new_document_id(),
        owner=owner,
        filename="long.md",
        content_type=ContentType.MARKDOWN,
        declared_bytes=len(text),
        status=DocumentStatus.READY,
        created_at=now,
        updated_at=now,
        expires_at=now + timedelta(days=30),
        sequence_id=new_sequence_id(),
        upload=Upload(etag="bench", bytes=len(text)),
        ready=ReadyFacts(pages=None, bytes=len(text), text_bytes=len(text), sha256=sha256),
    )
    DynamoDocumentRepository(h.client("dynamodb"), table).create(document)
    s3 = h.client("s3")
    S3DocumentObjects(lambda: s3, bucket).put_text(owner, document.document_id, text, sha256)
    return document.document_id


def _submit(h: Harness, body: dict[str, Any], sub: str) -> float:
    invocation = h.invoke("submit", submit_event(body, key=f"bench-{uuid.uuid4()}", sub=sub))
    if invocation.error or invocation.response["statusCode"] != 202:
        raise RuntimeError(f"submit failed: {invocation.error or invocation.response}")
    return invocation.duration_seconds


def run(h: Harness, *, repeats: int, document_bytes: int, say: Callable[[str], None]) -> dict[str, Any]:
    """The section of the report."""
    inline = long_document(MAX_INPUT_TEXT_BYTES)
    text = long_document(document_bytes).encode("utf-8")
    say(
        f"document submit: {repeats} submits on a {len(text)}-byte document and on {len(inline)} bytes inline"
    )
    inline_seconds, document_seconds = [], []
    for _ in range(repeats):
        sub = f"bench-docs-{uuid.uuid4().hex[:8]}"  # the submit rate is per owner
        document_id = _ready_document(h, Caller(tenant=SAMPLE_TENANT, sub=sub), text)
        inline_seconds.append(_submit(h, {"operation": "summarize", "input": {"text": inline}}, sub))
        document_seconds.append(
            _submit(h, {"operation": "summarize", "input": {"documentId": document_id}}, sub)
        )
    return {
        "method": (
            "The submit's handler against moto under its role, each pair from a fresh owner; the "
            "document written as the ingest leaves it, so only the submit is timed"
        ),
        "inline": {"bytes": len(inline.encode("utf-8")), "seconds": summary(inline_seconds)},
        "document": {"bytes": len(text), "seconds": summary(document_seconds)},
        "documentMiB": round(len(text) / MIB, 2),
    }
