"""Ports of the documents domain: the record's store, the objects' store and the extraction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from shared.errors import ConditionFailedError

if TYPE_CHECKING:
    from shared.cursor import ListPosition
    from shared.documents.extraction import Extracted
    from shared.documents.record import DocumentRecord, DocumentRejection, ReadyFacts, Upload
    from shared.documents.types import ContentType, DocumentStatus
    from shared.job import Caller


@dataclass(frozen=True)
class UploadTransition:
    """One guarded write of an upload's fate, applied as a single conditional write.

    It succeeds only while the document is AwaitingUpload and has taken no upload or this one
    (`upload.etag`). Target AwaitingUpload takes the upload (records it, so that no other upload
    to the key is ever read); Ready or Rejected settles the document with `ready` or `error`.
    Otherwise nothing changes and DocumentConflictError says how the document stands.
    """

    owner: Caller
    document_id: str
    upload: Upload
    target: DocumentStatus
    now: datetime
    ready: ReadyFacts | None = None
    error: DocumentRejection | None = None


@dataclass(frozen=True)
class DocumentPin:
    """A job's pin on a document, applied as one conditional write (then a second, only when the
    document already lives long enough: DynamoDB has no max()).

    It succeeds only while the document is Ready and takes jobs (`now` before its expiresAt). It
    adds the job to the pins, has the sweeper look at them at `check_at`, and raises the
    document's keptUntil (and its TTL) to `keep_until`, the job's own expiry, never lowering it:
    a job is gone at its expiresAt, so a pinned document outlives every job that reads it.
    """

    owner: Caller
    document_id: str
    job_id: str
    now: datetime
    check_at: datetime
    keep_until: datetime


class DocumentConflictError(ConditionFailedError):
    """A guarded write lost; `current` is the document as it stood (None when it does not exist)."""

    def __init__(self, current: DocumentRecord | None) -> None:
        super().__init__("The document changed before this write.")
        self.current = current


@dataclass(frozen=True)
class DocumentPageSlice:
    """One page of an owner's documents, newest first; `next_position` is where the next starts."""

    items: list[DocumentRecord]
    next_position: ListPosition | None


class DocumentRepository(Protocol):
    """Durable storage of document records, one item per document in its owner's partition.

    Every state change is one conditional write, so concurrent ingests of one document, and
    retried ones, can never settle it twice.
    """

    def create(self, document: DocumentRecord) -> None:
        """Write a new document; ConditionFailedError if one with its id exists for its owner."""
        ...

    def get(self, owner: Caller, document_id: str) -> DocumentRecord | None:
        """The owner's document, strongly consistent; None when the owner has no such document."""
        ...

    def transition(self, transition: UploadTransition) -> DocumentRecord:
        """Apply the transition and return the document as written; DocumentConflictError when refused."""
        ...

    def list_page(
        self, owner: Caller, limit: int, after: ListPosition | None, now: datetime
    ) -> DocumentPageSlice:
        """Up to `limit` of the owner's unexpired documents, newest first, after `after`; the page
        may be short while there are more (expired ones are skipped, not counted)."""
        ...

    def pin(self, pin: DocumentPin) -> None:
        """Add the job to the document's pins while it is Ready and takes jobs (again: no change),
        keep it at least until `pin.keep_until`, and have the sweeper look at the pins at
        `pin.check_at`; DocumentConflictError with the document as it stands (None: missing)
        otherwise."""
        ...

    def pins_due(self, shard: str, now: datetime, limit: int) -> list[tuple[Caller, str]]:
        """Up to `limit` pinned documents of a shard whose check is due: (owner, document id)."""
        ...

    def reschedule_pin_check(self, owner: Caller, document_id: str, check_at: datetime) -> None:
        """Look at the pins again at `check_at`, or never again when none is left."""
        ...

    def unpin(self, owner: Caller, document_id: str, job_id: str) -> None:
        """Remove the job from the document's pins; nothing when it holds none or is gone."""
        ...

    def delete(self, owner: Caller, document_id: str) -> None:
        """Remove the document while no job pins it: DocumentConflictError with the document as it
        stands when it is pinned, or with None when it does not exist."""
        ...


class DocumentObjects(Protocol):
    """A document's objects in the documents bucket: the uploaded file and its text."""

    def read_original(self, owner: Caller, document_id: str, upload: Upload) -> bytes:
        """The bytes of exactly the upload named (its ETag): OriginalChangedError when the key
        holds another object now, OriginalMissingError when it holds none."""
        ...

    def put_text(self, owner: Caller, document_id: str, text: bytes, sha256: str) -> None:
        """Store the extracted text (UTF-8) beside the original, with its SHA-256 (hex)."""
        ...

    def read_text(self, owner: Caller, document_id: str) -> bytes | None:
        """The stored text; None when there is none."""
        ...

    def delete(self, owner: Caller, document_id: str) -> None:
        """Remove the original and the text; harmless when either is already gone."""
        ...


@dataclass(frozen=True)
class UploadGrant:
    """A presigned POST: the URL, the form fields that carry the policy and its signature, and
    when the policy expires."""

    url: str
    fields: dict[str, str]
    expires_at: datetime


class UploadSigner(Protocol):
    """Signs a browser-style POST upload of one object, its policy pinning what may be sent."""

    def presign(self, key: str, content_type: str, max_bytes: int, expires_in_seconds: int) -> UploadGrant:
        """A POST whose policy allows exactly `key`, exactly `content_type` and 1..`max_bytes` bytes,
        until `expires_in_seconds` from now; signed with the caller's own credentials."""
        ...


class TextExtraction(Protocol):
    """Runs one format's extractor on a file, bounded in memory, CPU and time."""

    def extract(self, content_type: ContentType, data: bytes, timeout_seconds: float) -> Extracted:
        """The file's text; DocumentRejectedError with the reason it has none we may use."""
        ...


class DeadLetterQueue(Protocol):
    """Where a message that no retry can fix is parked, with why, for on-call to see."""

    def dead_letter(self, body: str, reason: str) -> None:
        """Send the body to the DLQ with the reason as an attribute."""
        ...
