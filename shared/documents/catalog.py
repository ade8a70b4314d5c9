"""The documents API's use cases: create (with its presigned POST), read, list and delete.

Owner only, everywhere: a document lives in its owner's partition, so another caller's read
finds nothing, and a missing, expired or foreign document is the same 404. No boto3 here: the
store, the objects, the signer and the cursor codec come in as ports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from shared.clock import Clock, truncate_to_millis
from shared.cursor import CursorCodec
from shared.documents.contract import (
    CreatedDocument,
    CreateDocumentRequest,
    DocumentPage,
    DocumentStatusDocument,
    UploadForm,
)
from shared.documents.keys import DocumentPart, object_key
from shared.documents.ports import DocumentConflictError, DocumentObjects, DocumentRepository, UploadSigner
from shared.documents.record import DocumentRecord
from shared.documents.settings import DocumentLimitSettings
from shared.documents.types import ContentType, DocumentStatus
from shared.errors import (
    DocumentInUseError,
    DocumentNotFoundError,
    DocumentTooLargeError,
    UnsupportedDocumentTypeError,
)
from shared.ids import new_document_id, new_sequence_id, normalize_job_id
from shared.job import Caller

# How long a presigned POST may be used (DESIGN.md: 10 minutes).
UPLOAD_EXPIRY_SECONDS = 600
# What a documents cursor is bound to besides the caller: never valid for the jobs list, nor a
# jobs cursor for this one.
_CURSOR_SCOPE = "documents"
_SUPPORTED = ", ".join(t.value for t in ContentType)


@dataclass(frozen=True)
class DocumentCatalog:
    """The owner's documents: what the documents function does, one method per route."""

    repository: DocumentRepository
    objects: DocumentObjects
    signer: UploadSigner
    cursor_codec: Callable[[], CursorCodec]
    clock: Clock
    limits: DocumentLimitSettings

    def create(self, caller: Caller, request: CreateDocumentRequest) -> CreatedDocument:
        """Record the document AwaitingUpload, then sign the POST that may upload its file."""
        content_type = _content_type(request.content_type)
        if request.bytes > self.limits.max_document_bytes:
            raise DocumentTooLargeError(
                f"A document may have at most {self.limits.max_document_bytes} bytes; "
                f"this one declares {request.bytes}."
            )
        now = truncate_to_millis(self.clock.now())
        document = DocumentRecord(
            document_id=new_document_id(),
            owner=caller,
            filename=request.filename,
            content_type=content_type,
            declared_bytes=request.bytes,
            status=DocumentStatus.AWAITING_UPLOAD,
            created_at=now,
            updated_at=now,
            expires_at=now + timedelta(days=self.limits.document_retention_days),
            sequence_id=new_sequence_id(),
        )
        # The record first: an upload the ingest is told of must find its document.
        self.repository.create(document)
        grant = self.signer.presign(
            object_key(caller, document.document_id, DocumentPart.ORIGINAL),
            content_type.value,
            request.bytes,
            UPLOAD_EXPIRY_SECONDS,
        )
        return CreatedDocument(
            document_id=document.document_id,
            status=document.status,
            upload=UploadForm(url=grant.url, fields=grant.fields, expires_at=grant.expires_at),
        )

    def get(self, caller: Caller, document_id: str) -> DocumentStatusDocument:
        """The caller's document."""
        return self._find(caller, document_id).status_document()

    def list_page(self, caller: Caller, limit: int, cursor: str | None) -> DocumentPage:
        """One page of the caller's documents, newest first; the cursor is bound to the caller."""
        codec = self.cursor_codec()
        after = codec.decode(caller, _CURSOR_SCOPE, cursor) if cursor is not None else None
        page = self.repository.list_page(caller, limit, after, self.clock.now())
        next_cursor = (
            codec.encode(caller, _CURSOR_SCOPE, page.next_position)
            if page.next_position is not None
            else None
        )
        return DocumentPage(items=[d.status_document() for d in page.items], next_cursor=next_cursor)

    def delete(self, caller: Caller, document_id: str) -> None:
        """Remove the caller's document and its objects, unless a job that reads it has not ended."""
        document = self._find(caller, document_id)
        try:
            self.repository.delete(caller, document.document_id)
        except DocumentConflictError as refused:
            if refused.current is None:
                raise DocumentNotFoundError from None
            raise DocumentInUseError from None
        # After the record: a crash here leaves objects that no document names, which the
        # prefix's lifecycle rule removes; the other order could lose a pinned job's input.
        self.objects.delete(caller, document.document_id)

    def _find(self, caller: Caller, document_id: str) -> DocumentRecord:
        canonical = normalize_job_id(document_id)
        document = self.repository.get(caller, canonical) if canonical else None
        if document is None or document.is_expired(self.clock.now()):
            raise DocumentNotFoundError
        return document


def _content_type(declared: str) -> ContentType:
    """The declared type, compared as media types are (case-insensitively, no parameters)."""
    media_type = declared.split(";", 1)[0].strip().lower()
    try:
        return ContentType(media_type)
    except ValueError:
        raise UnsupportedDocumentTypeError(
            f"Documents may be {_SUPPORTED}; this one was declared as another type."
        ) from None
