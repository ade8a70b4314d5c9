"""In-memory fakes of the documents' ports, with their adapters' conditional semantics.

tests/integration/test_document_store_contract.py runs one contract against each fake and its
adapter on moto. To inject a fault, subclass a fake in the test and override one method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from functions.ingest.formats import extractor_for
from shared.adapters.dynamo_items import list_key
from shared.adapters.dynamodb_documents import document_ttl, pin_shard, ttl_after
from shared.clock import truncate_to_millis
from shared.cursor import ListPosition
from shared.documents.extraction import Extracted, ExtractionLimits
from shared.documents.ports import (
    DocumentConflictError,
    DocumentPageSlice,
    DocumentPin,
    UploadGrant,
    UploadTransition,
)
from shared.documents.record import DocumentRecord, Upload
from shared.documents.types import ContentType, DocumentStatus
from shared.errors import ConditionFailedError, OriginalChangedError, OriginalMissingError
from shared.ids import new_document_id, new_sequence_id
from shared.job import Caller

OWNER = Caller(tenant="acme", sub="alice-sub")
CREATED = datetime(2030, 1, 15, 12, 0, 0, tzinfo=UTC)


def document_record(
    owner: Caller = OWNER,
    *,
    content_type: ContentType = ContentType.PDF,
    declared_bytes: int = 1024 * 1024,
    created_at: datetime = CREATED,
    **overrides: object,
) -> DocumentRecord:
    """A document as the create writes it: AwaitingUpload, revision 1, kept 30 days."""
    fields: dict[str, object] = {
        "document_id": new_document_id(),
        "owner": owner,
        "filename": "report.pdf",
        "content_type": content_type,
        "declared_bytes": declared_bytes,
        "status": DocumentStatus.AWAITING_UPLOAD,
        "created_at": created_at,
        "updated_at": created_at,
        "expires_at": created_at + timedelta(days=30),
        "sequence_id": new_sequence_id(),
    }
    return DocumentRecord.model_validate(fields | overrides)


def job_pin(
    document_id: str,
    job_id: str,
    *,
    now: datetime = CREATED,
    check_at: datetime | None = None,
    keep_until: datetime | None = None,
    owner: Caller = OWNER,
) -> DocumentPin:
    """A submit's pin: checked a dispatch grace (15 min) later, kept as long as a job of 30 days."""
    return DocumentPin(
        owner=owner,
        document_id=document_id,
        job_id=job_id,
        now=now,
        check_at=check_at or now + timedelta(minutes=15),
        keep_until=keep_until or now + timedelta(days=30),
    )


class InMemoryDocumentRepository:
    """Documents by (owner key, id), with DynamoDocumentRepository's conditions."""

    def __init__(self) -> None:
        self.documents: dict[tuple[str, str], DocumentRecord] = {}
        self.writes: list[str] = []
        # The pin index: when each pinned document's check is due (kept after its last unpin, as
        # the adapter's index keys are, until the sweeper drops it).
        self.pin_checks: dict[tuple[str, str], datetime] = {}

    def create(self, document: DocumentRecord) -> None:
        """Write a new document; ConditionFailedError when the id exists for the owner."""
        key = (document.owner.owner_key, document.document_id)
        if key in self.documents:
            raise ConditionFailedError("A document with this id exists.")
        self.documents[key] = document
        self.writes.append("create")

    def get(self, owner: Caller, document_id: str) -> DocumentRecord | None:
        """The owner's document, or None."""
        return self.documents.get((owner.owner_key, document_id))

    def transition(self, transition: UploadTransition) -> DocumentRecord:
        """Take or settle an upload while the document awaits one and has taken no other."""
        key = (transition.owner.owner_key, transition.document_id)
        current = self.documents.get(key)
        taken_by_another = (
            current is not None
            and current.upload is not None
            and current.upload.etag != transition.upload.etag
        )
        if current is None or current.status is not DocumentStatus.AWAITING_UPLOAD or taken_by_another:
            raise DocumentConflictError(current)
        written = current.model_copy(
            update={
                "status": transition.target,
                "upload": transition.upload,
                "updated_at": transition.now,
                "revision": current.revision + 1,
                "ready": transition.ready,
                "error": transition.error,
            }
        )
        self.documents[key] = written
        self.writes.append(f"transition:{transition.target.value}")
        return written

    def list_page(
        self, owner: Caller, limit: int, after: ListPosition | None, now: datetime
    ) -> DocumentPageSlice:
        """Newest first by (createdAt, sequence id); `limit` entries read, expired ones dropped
        from the page as the adapter's filter does (so a page may be short)."""
        mine = sorted(
            (d for (owner_key, _), d in self.documents.items() if owner_key == owner.owner_key),
            key=lambda d: list_key(d.created_at, d.sequence_id),
            reverse=True,
        )
        if after is not None:
            mine = [d for d in mine if list_key(d.created_at, d.sequence_id) < after.list_key]
        read = mine[:limit]
        more = len(mine) > limit
        last = read[-1] if read and more else None
        position = (
            ListPosition(list_key=list_key(last.created_at, last.sequence_id), job_id=last.document_id)
            if last
            else None
        )
        return DocumentPageSlice(items=[d for d in read if not d.is_expired(now)], next_position=position)

    def pin(self, pin: DocumentPin) -> None:
        """Add the job to the pins of a Ready document that takes jobs; its check is due at
        `check_at`; keptUntil rises to the job's expiry when the item's TTL is earlier."""
        key = (pin.owner.owner_key, pin.document_id)
        current = self.documents.get(key)
        if current is None or current.status is not DocumentStatus.READY or not current.takes_jobs(pin.now):
            raise DocumentConflictError(current)
        update: dict[str, object] = {"pinned_by": current.pinned_by | {pin.job_id}}
        if document_ttl(current) < ttl_after(pin.keep_until):
            update["kept_until"] = truncate_to_millis(pin.keep_until)  # what RFC 3339 keeps
        self.documents[key] = current.model_copy(update=update)
        self.pin_checks[key] = pin.check_at
        self.writes.append("pin")

    def pins_due(self, shard: str, now: datetime, limit: int) -> list[tuple[Caller, str]]:
        """Documents of the shard whose check is due, earliest first."""
        due = sorted(
            (at, key) for key, at in self.pin_checks.items() if at <= now and pin_shard(key[1]) == shard
        )
        found: list[tuple[Caller, str]] = []
        for _, (owner_key, document_id) in due[:limit]:
            tenant, _, sub = owner_key.partition("#")
            found.append((Caller(tenant=tenant, sub=sub), document_id))
        return found

    def reschedule_pin_check(self, owner: Caller, document_id: str, check_at: datetime) -> None:
        """Drop the check when no pin is left, else move it."""
        key = (owner.owner_key, document_id)
        current = self.documents.get(key)
        if current is None or not current.pinned_by:
            if current is not None:
                self.pin_checks.pop(key, None)
            return
        self.pin_checks[key] = check_at

    def unpin(self, owner: Caller, document_id: str, job_id: str) -> None:
        """Remove the job from the pins, if the document is there."""
        key = (owner.owner_key, document_id)
        current = self.documents.get(key)
        if current is not None:
            self.documents[key] = current.model_copy(update={"pinned_by": current.pinned_by - {job_id}})
            self.writes.append("unpin")

    def delete(self, owner: Caller, document_id: str) -> None:
        """Remove the document unless it is pinned or missing."""
        key = (owner.owner_key, document_id)
        current = self.documents.get(key)
        if current is None or current.pins > 0:
            raise DocumentConflictError(current)
        del self.documents[key]
        self.pin_checks.pop(key, None)
        self.writes.append("delete")


@dataclass
class _Stored:
    data: bytes
    etag: str


class InMemoryDocumentObjects:
    """Originals and texts by (owner key, id), with S3DocumentObjects' If-Match on the ETag."""

    def __init__(self) -> None:
        self.originals: dict[tuple[str, str], _Stored] = {}
        self.texts: dict[tuple[str, str], tuple[bytes, str]] = {}

    def upload(self, owner: Caller, document_id: str, data: bytes) -> Upload:
        """What a presigned POST does: store the original; the upload as its event will tell it."""
        etag = f"etag-{len(self.originals)}-{len(data)}"
        self.originals[(owner.owner_key, document_id)] = _Stored(data, etag)
        return Upload(etag=etag, bytes=len(data))

    def read_original(self, owner: Caller, document_id: str, upload: Upload) -> bytes:
        """The original, if it is still that upload."""
        stored = self.originals.get((owner.owner_key, document_id))
        if stored is None:
            raise OriginalMissingError(document_id)
        if stored.etag != upload.etag:
            raise OriginalChangedError(document_id)
        return stored.data

    def put_text(self, owner: Caller, document_id: str, text: bytes, sha256: str) -> None:
        """Store (or replace) the text."""
        self.texts[(owner.owner_key, document_id)] = (text, sha256)

    def read_text(self, owner: Caller, document_id: str) -> bytes | None:
        """The stored text, or None."""
        stored = self.texts.get((owner.owner_key, document_id))
        return stored[0] if stored else None

    def delete(self, owner: Caller, document_id: str) -> None:
        """Remove the original and the text, if there."""
        self.originals.pop((owner.owner_key, document_id), None)
        self.texts.pop((owner.owner_key, document_id), None)


@dataclass
class RecordingUploadSigner:
    """Grants whose fields say what was signed; every grant kept, in order."""

    url: str = "https://documents.example/"
    expires_at: datetime = CREATED
    grants: list[tuple[str, str, int, int]] = field(default_factory=list)

    def presign(self, key: str, content_type: str, max_bytes: int, expires_in_seconds: int) -> UploadGrant:
        """A grant naming the key and the type, as boto3's fields do."""
        self.grants.append((key, content_type, max_bytes, expires_in_seconds))
        return UploadGrant(
            url=self.url,
            fields={"key": key, "Content-Type": content_type, "policy": "signed"},
            expires_at=self.expires_at,
        )


@dataclass
class InProcessExtraction:
    """The format modules run in this process, without the child: the same verdicts (the
    contract test in tests/unit/test_extraction_sandbox.py holds them to the sandbox's)."""

    limits: ExtractionLimits
    calls: list[ContentType] = field(default_factory=list)

    def extract(self, content_type: ContentType, data: bytes, timeout_seconds: float) -> Extracted:
        """Extract in-process; `timeout_seconds` is not enforced here."""
        self.calls.append(content_type)
        return extractor_for(content_type).extract(data, self.limits)


@dataclass
class RecordingDeadLetters:
    """Parked messages, in order, with their reasons."""

    parked: list[tuple[str, str]] = field(default_factory=list)

    def dead_letter(self, body: str, reason: str) -> None:
        """Record the message and why."""
        self.parked.append((body, reason))
