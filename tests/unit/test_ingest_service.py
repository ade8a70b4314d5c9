"""The ingest use case with fakes: the first upload wins, settled documents stay settled,
redelivery is harmless, races are lost quietly, and poison goes to the DLQ."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from typing import Any

import pytest

from functions.ingest.dependencies import IngestDependencies
from functions.ingest.service import (
    FOREIGN_BUCKET,
    NOT_A_DOCUMENT_KEY,
    UNPARSEABLE,
    IngestService,
    RetryLater,
)
from functions.ingest.settings import IngestSettings
from shared import resources as r
from shared.documents.extraction import ExtractionLimits
from shared.documents.keys import DocumentPart, object_key
from shared.documents.ports import UploadTransition
from shared.documents.record import DocumentRecord, Upload
from shared.documents.types import ContentType, DocumentStatus, RejectCode
from shared.errors import StorageUnavailableError
from tests.document_fakes import (
    OWNER,
    InMemoryDocumentObjects,
    InMemoryDocumentRepository,
    InProcessExtraction,
    RecordingDeadLetters,
    document_record,
)
from tests.fakes import FakeClock
from tests.support import documents as files
from tests.support.events import s3_object_created, s3_test_event

BUCKET = "documents-bucket"
SETTINGS = IngestSettings.from_environ(
    {r.ENV_DOCUMENTS_TABLE: "documents", r.ENV_DOCUMENTS_BUCKET: BUCKET, r.ENV_INGEST_DLQ_URL: "dlq"}
)


@dataclass
class World:
    repository: InMemoryDocumentRepository
    objects: InMemoryDocumentObjects
    extraction: InProcessExtraction
    dead_letters: RecordingDeadLetters
    clock: FakeClock

    def deps(self) -> IngestDependencies:
        return IngestDependencies(
            settings=SETTINGS,
            repository=self.repository,
            objects=self.objects,
            extraction=self.extraction,
            dead_letters=self.dead_letters,
            clock=self.clock,
        )

    def service(self, seconds_left: float = 600) -> IngestService:
        return IngestService(self.deps(), time.monotonic() + seconds_left)

    def created(self, content_type: ContentType = ContentType.PDF, **fields: Any) -> DocumentRecord:
        document = document_record(content_type=content_type, **fields)
        self.repository.create(document)
        return document

    def upload(self, document: DocumentRecord, data: bytes) -> str:
        """Store the file as a presigned POST would; the body of the event S3 then sends."""
        upload = self.objects.upload(document.owner, document.document_id, data)
        return event_for(document, upload)

    def now(self, document: DocumentRecord) -> DocumentRecord:
        stored = self.repository.get(document.owner, document.document_id)
        assert stored is not None
        return stored


def event_for(document: DocumentRecord, upload: Upload, part: DocumentPart = DocumentPart.ORIGINAL) -> str:
    key = object_key(document.owner, document.document_id, part)
    return s3_object_created(BUCKET, key, size=upload.bytes, etag=upload.etag)


@pytest.fixture
def world() -> World:
    limits = ExtractionLimits(
        max_extracted_bytes=SETTINGS.max_extracted_bytes, max_pages=SETTINGS.max_document_pages
    )
    return World(
        InMemoryDocumentRepository(),
        InMemoryDocumentObjects(),
        InProcessExtraction(limits),
        RecordingDeadLetters(),
        FakeClock(),
    )


def test_an_upload_becomes_a_ready_document_with_its_text_beside_it(world):
    # Given a document awaiting its upload, and the upload's event
    data = files.pdf(["Hello", "World"])
    document = world.created()
    body = world.upload(document, data)

    # When the ingest handles it
    world.service().handle(body)

    # Then the text is stored with its SHA-256, and the document is Ready with what it is
    text = world.objects.read_text(OWNER, document.document_id)
    assert text == b"Hello\n\nWorld"
    stored = world.now(document)
    assert stored.status is DocumentStatus.READY
    assert stored.ready is not None
    assert stored.ready.model_dump() == {
        "pages": 2,
        "bytes": len(data),
        "text_bytes": len(text),
        "sha256": hashlib.sha256(text).hexdigest(),
    }
    assert stored.upload is not None
    assert world.repository.writes == ["create", "transition:AwaitingUpload", "transition:Ready"]


def test_a_file_the_extractor_rejects_settles_the_document_rejected_with_its_code(world):
    data = files.pdf(["secret"], password="pw")
    document = world.created()

    world.service().handle(world.upload(document, data))

    stored = world.now(document)
    assert stored.status is DocumentStatus.REJECTED
    assert stored.error is not None
    assert stored.error.code is RejectCode.DOCUMENT_ENCRYPTED
    assert world.objects.read_text(OWNER, document.document_id) is None


def test_an_upload_over_the_declared_size_is_rejected_unread(world):
    data = files.MARKDOWN.encode()
    document = world.created(ContentType.MARKDOWN, declared_bytes=len(data) - 1)

    world.service().handle(world.upload(document, data))

    stored = world.now(document)
    assert stored.error is not None
    assert stored.error.code is RejectCode.DOCUMENT_TOO_LARGE
    assert world.extraction.calls == []


def test_a_redelivered_event_changes_nothing(world):
    data = files.docx(["Once"])
    document = world.created(ContentType.DOCX)
    body = world.upload(document, data)
    world.service().handle(body)
    settled = world.now(document)

    world.service().handle(body)

    assert world.now(document) == settled
    assert world.extraction.calls == [ContentType.DOCX]


def test_a_later_upload_to_the_key_is_ignored_and_the_text_stays_frozen(world):
    first, second = files.docx(["First"]), files.docx(["Second upload"])
    document = world.created(ContentType.DOCX)
    world.service().handle(world.upload(document, first))
    settled = world.now(document)

    world.service().handle(world.upload(document, second))

    assert world.now(document) == settled
    assert world.objects.read_text(OWNER, document.document_id) == b"First"


def test_the_first_upload_taken_wins_over_a_second_whose_event_comes_later(world):
    # Given two uploads to the key before either event is handled; the second replaced the first
    first_data, second_data = files.MARKDOWN.encode(), b"# Second\n"
    document = world.created(ContentType.MARKDOWN)
    first = world.upload(document, first_data)
    second = world.upload(document, second_data)

    # When the second's event comes first, it is taken; the first's then finds it taken
    world.service().handle(second)
    world.service().handle(first)

    stored = world.now(document)
    assert stored.status is DocumentStatus.READY
    assert world.objects.read_text(OWNER, document.document_id) == second_data


def test_an_upload_replaced_before_it_was_read_is_rejected_not_mixed_up(world):
    # Given an upload whose event is handled after a second upload replaced the object
    first_data = files.MARKDOWN.encode()
    document = world.created(ContentType.MARKDOWN)
    first = world.upload(document, first_data)
    world.upload(document, b"# Replaced\n")

    world.service().handle(first)

    stored = world.now(document)
    assert stored.error is not None
    assert stored.error.code is RejectCode.DOCUMENT_UNREADABLE
    assert world.objects.read_text(OWNER, document.document_id) is None


def test_an_upload_taken_by_another_event_is_left_to_it(world):
    # Given a copy of the same document taken by another upload between our read and our take
    data = files.MARKDOWN.encode()
    document = world.created(ContentType.MARKDOWN)
    body = world.upload(document, data)

    class TakenMeanwhile(InMemoryDocumentRepository):
        def transition(self, transition: UploadTransition) -> DocumentRecord:
            if transition.target is DocumentStatus.AWAITING_UPLOAD:
                other = transition.__class__(
                    **{**transition.__dict__, "upload": Upload(etag="other", bytes=1)}
                )
                super().transition(other)
            return super().transition(transition)

    world.repository = _moved(world.repository, TakenMeanwhile())

    world.service().handle(body)

    assert world.now(document).status is DocumentStatus.AWAITING_UPLOAD
    assert world.extraction.calls == []


def test_a_copy_of_the_message_that_settled_first_leaves_the_other_to_lose_quietly(world):
    data = files.MARKDOWN.encode()
    document = world.created(ContentType.MARKDOWN)
    body = world.upload(document, data)

    class SettledMeanwhile(InMemoryDocumentRepository):
        def transition(self, transition: UploadTransition) -> DocumentRecord:
            if transition.target is DocumentStatus.READY:
                super().transition(replace(transition, target=DocumentStatus.REJECTED))
            return super().transition(transition)

    world.repository = _moved(world.repository, SettledMeanwhile())

    world.service().handle(body)  # no exception: the message is done

    assert world.now(document).status is DocumentStatus.REJECTED


def test_an_event_for_no_document_or_for_its_own_text_is_ignored(world):
    stranger = document_record(content_type=ContentType.MARKDOWN)
    document = world.created(ContentType.MARKDOWN)

    world.service().handle(event_for(stranger, Upload(etag="e", bytes=10)))
    world.service().handle(event_for(document, Upload(etag="e", bytes=10), DocumentPart.TEXT))

    assert world.repository.writes == ["create"]
    assert world.dead_letters.parked == []


def test_an_upload_whose_object_is_gone_is_ignored(world):
    data = files.MARKDOWN.encode()
    document = world.created(ContentType.MARKDOWN)
    body = world.upload(document, data)
    world.objects.originals.clear()

    world.service().handle(body)

    assert world.now(document).status is DocumentStatus.AWAITING_UPLOAD


def test_the_test_event_is_ignored(world):
    world.service().handle(s3_test_event(BUCKET))

    assert (world.repository.writes, world.dead_letters.parked) == ([], [])


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param("not json", UNPARSEABLE, id="unparseable"),
        pytest.param(
            s3_object_created(BUCKET, "inputs/x/original", 1, "e"), NOT_A_DOCUMENT_KEY, id="outside"
        ),
        pytest.param(
            s3_object_created(BUCKET, "documents/acme/x", 1, "e"), NOT_A_DOCUMENT_KEY, id="malformed"
        ),
        pytest.param(
            s3_object_created(
                "another-bucket", f"documents/acme/a/{'0' * 8}-0000-4000-8000-{'0' * 12}/original", 1, "e"
            ),
            FOREIGN_BUCKET,
            id="foreign-bucket",
        ),
    ],
)
def test_poison_is_parked_on_the_dlq_with_its_reason(world, body, reason):
    world.service().handle(body)

    assert world.dead_letters.parked == [(body, reason)]
    assert world.repository.writes == []


def test_an_extraction_that_would_outlast_the_invocation_waits_for_a_fresh_one(world):
    data = files.MARKDOWN.encode()
    document = world.created(ContentType.MARKDOWN)
    body = world.upload(document, data)

    with pytest.raises(RetryLater):
        world.service(seconds_left=SETTINGS.extraction_timeout_seconds - 1).handle(body)

    assert world.repository.writes == ["create"]
    world.service().handle(body)
    assert world.now(document).status is DocumentStatus.READY


def test_a_storage_failure_after_the_take_is_retried_and_the_retry_finishes_the_work(world):
    # Given a text write that fails once (after the upload was taken)
    data = files.MARKDOWN.encode()
    document = world.created(ContentType.MARKDOWN)
    body = world.upload(document, data)

    class FailsOnce(InMemoryDocumentObjects):
        failed = False

        def put_text(self, *arguments: object) -> None:
            if not self.failed:
                self.failed = True
                raise StorageUnavailableError("busy")
            super().put_text(*arguments)  # type: ignore[arg-type]

    objects = FailsOnce()
    objects.originals = world.objects.originals
    world.objects = objects

    with pytest.raises(StorageUnavailableError):
        world.service().handle(body)
    assert world.now(document).upload is not None  # taken, not settled

    # When the message comes back
    world.service().handle(body)

    # Then the redelivery, holding the same upload, finishes it
    assert world.now(document).status is DocumentStatus.READY
    assert world.objects.read_text(OWNER, document.document_id) == data


def _moved(old: InMemoryDocumentRepository, new: InMemoryDocumentRepository) -> InMemoryDocumentRepository:
    new.documents, new.writes = old.documents, old.writes
    return new
