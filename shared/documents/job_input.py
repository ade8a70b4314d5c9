"""A job's input from a document (DESIGN.md, "Documents": jobs on documents): the caller's Ready
document's extracted text, read once at submit, and the pin that keeps the document while the
job has not ended. No boto3: the store and the objects come in as ports."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from shared.documents.ports import DocumentConflictError, DocumentObjects, DocumentPin, DocumentRepository
from shared.documents.record import DocumentRecord
from shared.documents.types import DocumentStatus
from shared.errors import DocumentNotFoundError, DocumentNotReadyError
from shared.job import Caller


@dataclass(frozen=True)
class DocumentText:
    """What a job reads from its document: the text, and the SHA-256 the job records."""

    document_id: str
    text: str
    sha256: str


def read_document_text(
    documents: DocumentRepository,
    objects: DocumentObjects,
    caller: Caller,
    document_id: str,
    *,
    now: datetime,
    retry_after: int,
) -> DocumentText:
    """The caller's Ready document's text (one GetItem, one S3 GET of at most maxExtractedBytes).

    404 document_not_found for a missing, expired or foreign document (never saying which): past
    its retention a document takes no new job, even while earlier jobs' pins keep it; 409
    document_not_ready while it awaits its upload (with Retry-After) or once Rejected (without).
    """
    canonical = document_id.lower()
    document = documents.get(caller, canonical)
    if document is None or not document.takes_jobs(now):
        raise DocumentNotFoundError
    _require_ready(document, retry_after)
    stored = objects.read_text(caller, canonical)
    ready = document.ready
    if stored is None or ready is None or hashlib.sha256(stored).hexdigest() != ready.sha256:
        # Its text is gone (a delete racing this submit) or is not the text the ingest froze.
        raise DocumentNotFoundError
    return DocumentText(document_id=canonical, text=stored.decode("utf-8"), sha256=ready.sha256)


def pin_document(documents: DocumentRepository, pin: DocumentPin) -> None:
    """Pin the document for the job (again: no change), before the job is written, keeping it at
    least as long as the job can exist (`pin.keep_until`, the job's expiresAt); the sweeper looks
    at the pin at `pin.check_at` (shared.documents.pin_repair)."""
    try:
        documents.pin(pin)
    except DocumentConflictError as refused:
        if refused.current is None or not refused.current.takes_jobs(pin.now):
            raise DocumentNotFoundError from None
        _require_ready(refused.current, retry_after=None)
        raise


def _require_ready(document: DocumentRecord, retry_after: int | None) -> None:
    if document.status is DocumentStatus.READY:
        return
    if document.status is DocumentStatus.AWAITING_UPLOAD:
        raise DocumentNotReadyError(
            "The document's file has not been uploaded and read yet; retry once it is Ready.",
            retry_after=retry_after,
        )
    raise DocumentNotReadyError(
        "The document was rejected; it will never be Ready. Upload the file again as a new document.",
        retry_after=None,
    )
