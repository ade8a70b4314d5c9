"""The documents API's use cases on fakes: create signs a POST pinned to the owner's key, reads
and deletes are the owner's only, a pinned document is not deleted, lists page with signed cursors."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.cursor import CursorCodec
from shared.documents.catalog import UPLOAD_EXPIRY_SECONDS, DocumentCatalog
from shared.documents.contract import CreateDocumentRequest
from shared.documents.keys import DocumentPart, object_key
from shared.documents.settings import DocumentLimitSettings
from shared.documents.types import ContentType, DocumentStatus
from shared.errors import (
    DocumentInUseError,
    DocumentNotFoundError,
    DocumentTooLargeError,
    InvalidCursorError,
    UnsupportedDocumentTypeError,
)
from shared.job import Caller
from tests.document_fakes import (
    CREATED,
    OWNER,
    InMemoryDocumentObjects,
    InMemoryDocumentRepository,
    RecordingUploadSigner,
)
from tests.fakes import FakeClock

OTHER = Caller(tenant="acme", sub="bob-sub")


@pytest.fixture
def repository() -> InMemoryDocumentRepository:
    return InMemoryDocumentRepository()


@pytest.fixture
def objects() -> InMemoryDocumentObjects:
    return InMemoryDocumentObjects()


@pytest.fixture
def signer() -> RecordingUploadSigner:
    return RecordingUploadSigner()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(CREATED)


@pytest.fixture
def catalog(
    repository: InMemoryDocumentRepository,
    objects: InMemoryDocumentObjects,
    signer: RecordingUploadSigner,
    clock: FakeClock,
) -> DocumentCatalog:
    codec = CursorCodec(b"k" * 32)
    return DocumentCatalog(
        repository=repository,
        objects=objects,
        signer=signer,
        cursor_codec=lambda: codec,
        clock=clock,
        limits=DocumentLimitSettings(),
    )


def _request(**fields: object) -> CreateDocumentRequest:
    body = {"filename": "report.pdf", "contentType": "application/pdf", "bytes": 5000} | fields
    return CreateDocumentRequest.model_validate(body)


def test_create_records_the_document_then_signs_a_post_for_its_key(
    catalog: DocumentCatalog, repository: InMemoryDocumentRepository, signer: RecordingUploadSigner
) -> None:
    created = catalog.create(OWNER, _request())

    assert created.status is DocumentStatus.AWAITING_UPLOAD
    stored = repository.get(OWNER, created.document_id)
    assert stored is not None
    assert stored.declared_bytes == 5000
    assert stored.expires_at == CREATED + timedelta(days=30)
    key = object_key(OWNER, created.document_id, DocumentPart.ORIGINAL)
    assert signer.grants == [(key, "application/pdf", 5000, UPLOAD_EXPIRY_SECONDS)]
    assert created.upload.fields["key"] == key


def test_the_type_is_compared_as_a_media_type(
    catalog: DocumentCatalog, signer: RecordingUploadSigner
) -> None:
    catalog.create(OWNER, _request(contentType="Text/Markdown; charset=utf-8"))

    assert signer.grants[0][1] == ContentType.MARKDOWN.value


@pytest.mark.parametrize("content_type", ["image/png", "application/msword", "text/html", "application"])
def test_a_type_outside_the_list_is_refused_before_anything_is_written(
    catalog: DocumentCatalog, repository: InMemoryDocumentRepository, content_type: str
) -> None:
    with pytest.raises(UnsupportedDocumentTypeError):
        catalog.create(OWNER, _request(contentType=content_type))
    assert repository.writes == []


def test_a_size_over_the_maximum_is_refused(catalog: DocumentCatalog) -> None:
    with pytest.raises(DocumentTooLargeError):
        catalog.create(OWNER, _request(bytes=25 * 1024 * 1024 + 1))


def test_only_the_owner_reads_a_document(catalog: DocumentCatalog) -> None:
    document_id = catalog.create(OWNER, _request()).document_id

    assert catalog.get(OWNER, document_id.upper()).document_id == document_id
    with pytest.raises(DocumentNotFoundError):
        catalog.get(OTHER, document_id)
    with pytest.raises(DocumentNotFoundError):
        catalog.get(OWNER, "not-a-uuid")


def test_an_expired_document_is_gone(catalog: DocumentCatalog, clock: FakeClock) -> None:
    document_id = catalog.create(OWNER, _request()).document_id
    clock.set(CREATED + timedelta(days=30))

    with pytest.raises(DocumentNotFoundError):
        catalog.get(OWNER, document_id)


def test_delete_removes_the_record_and_the_objects(
    catalog: DocumentCatalog, repository: InMemoryDocumentRepository, objects: InMemoryDocumentObjects
) -> None:
    document_id = catalog.create(OWNER, _request()).document_id
    objects.upload(OWNER, document_id, b"%PDF")

    with pytest.raises(DocumentNotFoundError):
        catalog.delete(OTHER, document_id)
    catalog.delete(OWNER, document_id)

    assert repository.get(OWNER, document_id) is None
    assert objects.originals == {}


def test_a_pinned_document_is_in_use_and_kept(
    catalog: DocumentCatalog, repository: InMemoryDocumentRepository, objects: InMemoryDocumentObjects
) -> None:
    document_id = catalog.create(OWNER, _request()).document_id
    objects.upload(OWNER, document_id, b"%PDF")
    key = (OWNER.owner_key, document_id)
    repository.documents[key] = repository.documents[key].model_copy(update={"pinned_by": frozenset({"j"})})

    with pytest.raises(DocumentInUseError):
        catalog.delete(OWNER, document_id)

    assert repository.get(OWNER, document_id) is not None
    assert objects.originals


def test_a_pinned_document_past_its_expiry_is_read_until_its_pins_end(
    catalog: DocumentCatalog, repository: InMemoryDocumentRepository, clock: FakeClock
) -> None:
    """A pin kept it (DESIGN.md: "a pin extends it"): GET, the list and DELETE's 409 go on past
    its expiresAt while the pin holds; the job's unpin makes it the expired document it is."""
    document_id = catalog.create(OWNER, _request()).document_id
    key = (OWNER.owner_key, document_id)
    kept = CREATED + timedelta(days=59)
    pinned = {"pinned_by": frozenset({"job-1"}), "kept_until": kept}
    repository.documents[key] = repository.documents[key].model_copy(update=pinned)
    clock.set(CREATED + timedelta(days=45))

    assert catalog.get(OWNER, document_id).expires_at == CREATED + timedelta(days=30)
    assert [d.document_id for d in catalog.list_page(OWNER, 10, None).items] == [document_id]
    with pytest.raises(DocumentInUseError):
        catalog.delete(OWNER, document_id)

    repository.unpin(OWNER, document_id, "job-1")
    with pytest.raises(DocumentNotFoundError):
        catalog.get(OWNER, document_id)
    assert catalog.list_page(OWNER, 10, None).items == []


def test_the_list_pages_with_cursors_bound_to_the_caller(catalog: DocumentCatalog, clock: FakeClock) -> None:
    made = []
    for n in range(3):
        clock.set(CREATED + timedelta(seconds=n))
        made.append(catalog.create(OWNER, _request()).document_id)

    first = catalog.list_page(OWNER, 2, None)
    assert [d.document_id for d in first.items] == [made[2], made[1]]
    assert first.next_cursor is not None
    second = catalog.list_page(OWNER, 2, first.next_cursor)
    assert [d.document_id for d in second.items] == [made[0]]
    assert second.next_cursor is None
    assert catalog.list_page(OTHER, 10, None).items == []
    with pytest.raises(InvalidCursorError):
        catalog.list_page(OTHER, 2, first.next_cursor)
