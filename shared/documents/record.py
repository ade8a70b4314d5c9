"""The document as stored: the record every transition rewrites, and how an upload event is judged.

A document is created AwaitingUpload with the size its upload declared. The ingest takes the
first upload it sees (its ETag is recorded on the document, in a conditional write), reads
exactly that object, and settles the document once: Ready with what its text is, or Rejected
with why. Every later upload to the key, and every redelivered event, finds the document taken
or settled and changes nothing.
"""

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from shared.documents.contract import DocumentErrorDocument, DocumentStatusDocument, ReadyDocument
from shared.documents.types import SETTLED, ContentType, DocumentStatus, RejectCode
from shared.job import Caller


class Upload(BaseModel):
    """One object written to a document's key, as its S3 event tells it: its ETag and size."""

    model_config = ConfigDict(frozen=True)

    etag: str
    bytes: int


class ReadyFacts(BaseModel):
    """What a Ready document's text is: its pages (None for formats without), the stored file's
    size, the text's UTF-8 size and the text's SHA-256 (hex), which jobs on it record."""

    model_config = ConfigDict(frozen=True)

    pages: int | None
    bytes: int
    text_bytes: int
    sha256: str


class DocumentRejection(BaseModel):
    """Why a document was rejected: a stable code and a message safe to show its owner."""

    model_config = ConfigDict(frozen=True)

    code: RejectCode
    message: str


class DocumentRecord(BaseModel):
    """Everything outlast keeps about a document; its file and text are objects beside it."""

    model_config = ConfigDict(frozen=True)

    document_id: str
    owner: Caller
    filename: str
    content_type: ContentType
    # What the create declared: the upload may be at most this size (the POST policy says so).
    declared_bytes: int
    status: DocumentStatus
    created_at: datetime
    updated_at: datetime
    # The end of the retention (createdAt + documentRetentionDays): the document takes jobs until
    # then, and goes then unless a job pins it. Pins never move it.
    expires_at: datetime
    # Time-ordered (shared.ids.new_sequence_id): breaks creation-time ties in the owner's list.
    sequence_id: str
    # The upload the ingest took (the first it saw); only that object's bytes become the text.
    upload: Upload | None = None
    ready: ReadyFacts | None = None
    error: DocumentRejection | None = None
    # Jobs that read this document and have not ended, by id: while any do, it is not deleted
    # (DESIGN.md, "An accepted job never loses its input"). A set, so that a repeated pin (a
    # retried submit) or unpin (a redelivered terminal record) changes nothing.
    pinned_by: frozenset[str] = frozenset()
    # How long the pins keep the document: the latest expiry of a job that pinned it (a job is
    # gone at its own expiresAt), when that is after `expires_at`; raised by pins, never lowered.
    # The item's TTL is the later of the two (DESIGN.md: "a pin extends it").
    kept_until: datetime | None = None
    # +1 on every write: a document as the create writes it is revision 1.
    revision: int = 1

    @property
    def pins(self) -> int:
        """How many jobs pin the document."""
        return len(self.pinned_by)

    @property
    def is_settled(self) -> bool:
        """True once Ready or Rejected: no upload changes it any more."""
        return self.status in SETTLED

    @property
    def lives_until(self) -> datetime:
        """When the item's TTL removes the document: its expiry, or later when a pin kept it."""
        return max(self.expires_at, self.kept_until or self.expires_at)

    def takes_jobs(self, now: datetime) -> bool:
        """Whether a new job may read (and pin) it: only within its retention. This bounds how
        long pins can keep it, so the bucket's lifecycle rule can outlast every pin."""
        return now < self.expires_at

    def is_expired(self, now: datetime) -> bool:
        """Expired documents are gone, whether or not TTL has deleted the item yet: at the end
        of the retention, or, while a job pins it, when the pins' extension ends too."""
        return now >= (self.lives_until if self.pinned_by else self.expires_at)

    def status_document(self) -> DocumentStatusDocument:
        """The owner's view: no storage keys, no upload ETag."""
        return DocumentStatusDocument(
            document_id=self.document_id,
            status=self.status,
            filename=self.filename,
            content_type=self.content_type,
            bytes=self.declared_bytes,
            created_at=self.created_at,
            updated_at=self.updated_at,
            expires_at=self.expires_at,
            ready=ReadyDocument(
                pages=self.ready.pages,
                bytes=self.ready.bytes,
                text_bytes=self.ready.text_bytes,
                sha256=self.ready.sha256,
            )
            if self.ready
            else None,
            error=DocumentErrorDocument(code=self.error.code, message=self.error.message)
            if self.error
            else None,
        )


class UploadVerdict(StrEnum):
    """What the ingest does with one upload event, decided from the document as read."""

    INGEST = "ingest"  # read the object, extract its text, settle the document
    REJECT_TOO_LARGE = "reject_too_large"  # settle Rejected now: the object is over what was declared
    NO_DOCUMENT = "no_document"  # nothing to do: no such document (expired, deleted, never made)
    SETTLED = "settled"  # nothing to do: the document was settled (by this upload or an earlier one)
    TAKEN = "taken"  # nothing to do: the ingest took another upload to this key first


def judge_upload(document: DocumentRecord | None, upload: Upload, max_document_bytes: int) -> UploadVerdict:
    """The verdict on an upload event; a redelivered event of the upload taken gets INGEST again.

    The size is S3's, from the event: in AWS the POST policy's content-length-range already held
    the upload to what was declared, so a larger object means a front that did not check it.
    """
    if document is None:
        return UploadVerdict.NO_DOCUMENT
    if document.is_settled:
        return UploadVerdict.SETTLED
    if document.upload is not None and document.upload.etag != upload.etag:
        return UploadVerdict.TAKEN
    if upload.bytes > min(document.declared_bytes, max_document_bytes):
        return UploadVerdict.REJECT_TOO_LARGE
    return UploadVerdict.INGEST


def too_large_rejection(
    upload: Upload, document: DocumentRecord, max_document_bytes: int
) -> DocumentRejection:
    """Why an upload over its declared size (or the stage's maximum) is rejected."""
    limit = min(document.declared_bytes, max_document_bytes)
    return DocumentRejection(
        code=RejectCode.DOCUMENT_TOO_LARGE,
        message=f"The uploaded file has {upload.bytes} bytes; at most {limit} were allowed.",
    )
