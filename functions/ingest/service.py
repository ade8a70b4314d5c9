"""The ingest use case: one queue message (an S3 notification) -> documents taken and settled.

For each object written under the documents prefix: the document its key names must exist and
await an upload, and the object must be within the size declared. The first upload the ingest
sees is taken (its ETag recorded in a conditional write), read by that ETag, extracted in the
sandbox, its text stored beside it, and the document settled Ready or Rejected in one more
conditional write. Every step is safe to repeat: a redelivered message finds the upload taken
by itself (and does the same work again, with the same result) or the document settled.
"""

from __future__ import annotations

import hashlib
import time
from datetime import datetime
from typing import TYPE_CHECKING

from functions.ingest.notifications import ObjectCreated, parse_notification
from shared.clock import truncate_to_millis
from shared.documents.keys import DocumentKey, DocumentPart, parse_key
from shared.documents.ports import DocumentConflictError, UploadTransition
from shared.documents.record import (
    DocumentRecord,
    DocumentRejection,
    ReadyFacts,
    Upload,
    UploadVerdict,
    judge_upload,
    too_large_rejection,
)
from shared.documents.types import DocumentStatus, RejectCode
from shared.errors import DocumentRejectedError, OriginalChangedError, OriginalMissingError
from shared.observability import logger, metrics

if TYPE_CHECKING:
    from functions.ingest.dependencies import IngestDependencies

# Why a message goes to the DLQ (its `reason` attribute).
UNPARSEABLE = "unparseable"
FOREIGN_BUCKET = "foreign_bucket"
NOT_A_DOCUMENT_KEY = "not_a_document_key"


class RetryLater(Exception):  # noqa: N818 - a signal to the handler, not an error
    """Too little of the invocation is left to extract in: the message returns to the queue."""


class IngestService:
    """Handles one message at a time; `deadline` (time.monotonic()) is when the invocation must
    be done, so no extraction starts unless its whole wall-clock limit fits before it."""

    def __init__(self, deps: IngestDependencies, deadline: float) -> None:
        self._deps = deps
        self._settings = deps.settings
        self._deadline = deadline

    def handle(self, body: str) -> None:
        """Process one message; return to delete it, raise to have it redelivered."""
        notification = parse_notification(body)
        if notification is None:
            self._park(body, UNPARSEABLE)
            return
        if notification.test_event:
            logger.info("S3 test event ignored")
            return
        targets: list[tuple[ObjectCreated, DocumentKey]] = []
        for created in notification.objects:
            if created.bucket != self._settings.documents_bucket:
                self._park(body, FOREIGN_BUCKET)
                return
            key = parse_key(created.key)
            if key is None:
                self._park(body, NOT_A_DOCUMENT_KEY)
                return
            targets.append((created, key))
        for created, key in targets:
            if key.part is DocumentPart.ORIGINAL:
                self._ingest(key, created.upload)
            # else: the ingest's own text, written beside an original; nothing to do

    def _park(self, body: str, reason: str) -> None:
        # Poison: no retry can fix it, so it goes to the DLQ now instead of after maxReceiveCount.
        self._deps.dead_letters.dead_letter(body, reason)
        metrics.add_metric(name="PoisonMessages", unit="Count", value=1)
        logger.warning("poison message parked on the DLQ", extra={"reason": reason})

    def _ingest(self, key: DocumentKey, upload: Upload) -> None:
        document = self._deps.repository.get(key.owner, key.document_id)
        verdict = judge_upload(document, upload, self._settings.max_document_bytes)
        if verdict is UploadVerdict.REJECT_TOO_LARGE and document is not None:
            self._settle(
                key, upload, error=too_large_rejection(upload, document, self._settings.max_document_bytes)
            )
        elif verdict is UploadVerdict.INGEST and document is not None:
            self._extract(document, key, upload)
        else:
            _ignored(key, verdict)

    def _extract(self, document: DocumentRecord, key: DocumentKey, upload: Upload) -> None:
        timeout = self._settings.extraction_timeout_seconds
        if time.monotonic() + timeout > self._deadline:
            raise RetryLater(key.document_id)
        if document.upload is None and not self._take(key, upload):
            return
        try:
            data = self._deps.objects.read_original(key.owner, key.document_id, upload)
        except OriginalChangedError:
            message = "The file was replaced while it was being read. Upload it as a new document."
            self._settle(
                key, upload, error=DocumentRejection(code=RejectCode.DOCUMENT_UNREADABLE, message=message)
            )
            return
        except OriginalMissingError:
            _ignored(key, "object_gone")
            return
        try:
            extracted = self._deps.extraction.extract(document.content_type, data, timeout)
        except DocumentRejectedError as rejected:
            self._settle(key, upload, error=DocumentRejection(code=rejected.code, message=rejected.message))
            return
        text = extracted.text.encode("utf-8")
        sha256 = hashlib.sha256(text).hexdigest()
        self._deps.objects.put_text(key.owner, key.document_id, text, sha256)
        facts = ReadyFacts(pages=extracted.pages, bytes=len(data), text_bytes=len(text), sha256=sha256)
        self._settle(key, upload, ready=facts)

    def _take(self, key: DocumentKey, upload: Upload) -> bool:
        """Record the upload on the document; False when another upload or a settle won."""
        transition = UploadTransition(
            owner=key.owner,
            document_id=key.document_id,
            upload=upload,
            target=DocumentStatus.AWAITING_UPLOAD,
            now=self._now(),
        )
        try:
            self._deps.repository.transition(transition)
        except DocumentConflictError as refused:
            _ignored(key, judge_upload(refused.current, upload, self._settings.max_document_bytes))
            return False
        return True

    def _settle(
        self,
        key: DocumentKey,
        upload: Upload,
        *,
        ready: ReadyFacts | None = None,
        error: DocumentRejection | None = None,
    ) -> None:
        target = DocumentStatus.READY if ready is not None else DocumentStatus.REJECTED
        transition = UploadTransition(
            owner=key.owner,
            document_id=key.document_id,
            upload=upload,
            target=target,
            now=self._now(),
            ready=ready,
            error=error,
        )
        try:
            self._deps.repository.transition(transition)
        except DocumentConflictError as refused:
            # A copy of this message (redelivered while this one ran) settled it first.
            _ignored(key, judge_upload(refused.current, upload, self._settings.max_document_bytes))
            return
        if ready is not None:
            metrics.add_metric(name="DocumentsReady", unit="Count", value=1)
            logger.info(
                "document ready",
                extra={"document_id": key.document_id, "pages": ready.pages, "text_bytes": ready.text_bytes},
            )
        elif error is not None:
            metrics.add_metric(name="DocumentsRejected", unit="Count", value=1)
            logger.info("document rejected", extra={"document_id": key.document_id, "code": error.code.value})

    def _now(self) -> datetime:
        return truncate_to_millis(self._deps.clock.now())


def _ignored(key: DocumentKey, why: str) -> None:
    metrics.add_metric(name="UploadEventsIgnored", unit="Count", value=1)
    logger.info("upload event ignored", extra={"document_id": key.document_id, "why": str(why)})
