"""One contract for the documents' stores: each in-memory fake and its adapter (on moto) agree,
so the ingest's unit tests with the fakes say what the ingest does against AWS."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import boto3
import pytest

from shared import resources as r
from shared.adapters.dynamodb_documents import DynamoDocumentRepository, document_key, pin_shard
from shared.adapters.s3_documents import S3DocumentObjects
from shared.adapters.sqs_dead_letters import SqsDeadLetterQueue
from shared.documents.keys import DocumentPart, object_key
from shared.documents.ports import (
    DocumentConflictError,
    DocumentObjects,
    DocumentRepository,
    UploadTransition,
)
from shared.documents.record import DocumentRejection, ReadyFacts, Upload
from shared.documents.types import DocumentStatus, RejectCode
from shared.errors import ConditionFailedError, OriginalChangedError, OriginalMissingError
from shared.job import Caller
from tests.document_fakes import (
    CREATED,
    OWNER,
    InMemoryDocumentObjects,
    InMemoryDocumentRepository,
    RecordingDeadLetters,
    document_record,
    job_pin,
)
from tests.support.aws import REGION, DocumentResources, create_document_resources

pytestmark = pytest.mark.integration

UPLOAD = Upload(etag="etag-1", bytes=1000)
READY_FACTS = ReadyFacts(pages=1, bytes=1000, text_bytes=10, sha256="0" * 64)
LATER = CREATED + timedelta(minutes=1)


@pytest.fixture
def documents(moto_endpoint: str) -> DocumentResources:
    return create_document_resources(moto_endpoint)


def _client(name: str, endpoint: str) -> Any:
    return boto3.client(name, endpoint_url=endpoint, region_name=REGION)  # type: ignore[call-overload]


@pytest.fixture(params=["fake", "dynamodb"])
def repository(request: pytest.FixtureRequest) -> DocumentRepository:
    if request.param == "fake":
        return InMemoryDocumentRepository()
    resources: DocumentResources = request.getfixturevalue("documents")
    return DynamoDocumentRepository(
        _client("dynamodb", request.getfixturevalue("moto_endpoint")), resources.table
    )


def _transition(
    document_id: str, target: DocumentStatus, upload: Upload = UPLOAD, **fields: Any
) -> UploadTransition:
    return UploadTransition(
        owner=OWNER, document_id=document_id, upload=upload, target=target, now=LATER, **fields
    )


def test_a_created_document_reads_back_as_written(repository: DocumentRepository) -> None:
    document = document_record()
    repository.create(document)

    assert repository.get(OWNER, document.document_id) == document
    with pytest.raises(ConditionFailedError):
        repository.create(document)


def test_another_owner_reads_nothing(repository: DocumentRepository) -> None:
    document = document_record()
    repository.create(document)

    assert repository.get(Caller(tenant=OWNER.tenant, sub="mallory"), document.document_id) is None
    assert repository.get(Caller(tenant="other", sub=OWNER.sub), document.document_id) is None


def test_take_then_settle_ready(repository: DocumentRepository) -> None:
    document = document_record()
    repository.create(document)
    ready = ReadyFacts(pages=2, bytes=1000, text_bytes=12, sha256="ab" * 32)

    taken = repository.transition(_transition(document.document_id, DocumentStatus.AWAITING_UPLOAD))
    settled = repository.transition(_transition(document.document_id, DocumentStatus.READY, ready=ready))

    assert (taken.status, taken.upload, taken.revision) == (DocumentStatus.AWAITING_UPLOAD, UPLOAD, 2)
    assert settled == document.model_copy(
        update={
            "status": DocumentStatus.READY,
            "upload": UPLOAD,
            "ready": ready,
            "updated_at": LATER,
            "revision": 3,
        }
    )
    assert repository.get(OWNER, document.document_id) == settled


def test_settle_rejected_without_a_take(repository: DocumentRepository) -> None:
    document = document_record()
    repository.create(document)
    error = DocumentRejection(code=RejectCode.DOCUMENT_TOO_LARGE, message="Too large.")

    settled = repository.transition(_transition(document.document_id, DocumentStatus.REJECTED, error=error))

    assert (settled.status, settled.error, settled.ready) == (DocumentStatus.REJECTED, error, None)
    assert repository.get(OWNER, document.document_id) == settled


def test_another_upload_is_refused_once_one_is_taken(repository: DocumentRepository) -> None:
    document = document_record()
    repository.create(document)
    taken = repository.transition(_transition(document.document_id, DocumentStatus.AWAITING_UPLOAD))

    with pytest.raises(DocumentConflictError) as refused:
        repository.transition(
            _transition(document.document_id, DocumentStatus.READY, Upload(etag="e2", bytes=5))
        )

    assert refused.value.current == taken
    # The upload taken may take again (a redelivery) and settle
    assert (
        repository.transition(_transition(document.document_id, DocumentStatus.AWAITING_UPLOAD)) is not None
    )


def test_a_settled_document_refuses_every_transition(repository: DocumentRepository) -> None:
    document = document_record()
    repository.create(document)
    error = DocumentRejection(code=RejectCode.DOCUMENT_UNREADABLE, message="Unreadable.")
    settled = repository.transition(_transition(document.document_id, DocumentStatus.REJECTED, error=error))

    for target in DocumentStatus:
        with pytest.raises(DocumentConflictError) as refused:
            repository.transition(_transition(document.document_id, target))
        assert refused.value.current == settled


def test_a_transition_of_no_document_is_refused_and_creates_nothing(repository: DocumentRepository) -> None:
    document = document_record()

    with pytest.raises(DocumentConflictError) as refused:
        repository.transition(_transition(document.document_id, DocumentStatus.AWAITING_UPLOAD))

    assert refused.value.current is None
    assert repository.get(OWNER, document.document_id) is None


def test_the_list_is_the_owners_newest_first_in_pages(repository: DocumentRepository) -> None:
    made = [document_record(created_at=CREATED + timedelta(seconds=n)) for n in range(3)]
    for document in made:
        repository.create(document)
    repository.create(document_record(Caller(tenant="acme", sub="bob-sub")))
    now = CREATED + timedelta(days=1)

    first = repository.list_page(OWNER, 2, None, now)
    assert [d.document_id for d in first.items] == [made[2].document_id, made[1].document_id]
    assert first.next_position is not None
    second = repository.list_page(OWNER, 2, first.next_position, now)
    assert [d.document_id for d in second.items] == [made[0].document_id]
    assert second.next_position is None


def test_the_list_leaves_expired_documents_out(repository: DocumentRepository) -> None:
    old = document_record(created_at=CREATED - timedelta(days=40))
    repository.create(old)

    assert repository.list_page(OWNER, 10, None, CREATED).items == []


def test_delete_removes_an_unpinned_document(repository: DocumentRepository) -> None:
    document = document_record()
    repository.create(document)

    repository.delete(OWNER, document.document_id)

    assert repository.get(OWNER, document.document_id) is None
    with pytest.raises(DocumentConflictError) as refused:
        repository.delete(OWNER, document.document_id)
    assert refused.value.current is None


def test_delete_refuses_a_pinned_document_and_says_so(repository: DocumentRepository) -> None:
    document = document_record(pinned_by=frozenset({"job-1"}))
    repository.create(document)

    with pytest.raises(DocumentConflictError) as refused:
        repository.delete(OWNER, document.document_id)

    assert refused.value.current == document
    assert repository.get(OWNER, document.document_id) == document


def test_pins_are_a_set_of_jobs_and_only_a_ready_document_takes_one(repository: DocumentRepository) -> None:
    ready = document_record(status=DocumentStatus.READY, upload=UPLOAD, ready=READY_FACTS)
    awaiting = document_record()
    repository.create(ready)
    repository.create(awaiting)

    repository.pin(job_pin(ready.document_id, "job-1", check_at=LATER))
    repository.pin(job_pin(ready.document_id, "job-1", check_at=LATER))  # a retried submit: no second pin
    repository.pin(job_pin(ready.document_id, "job-2", check_at=LATER))
    assert repository.get(OWNER, ready.document_id).pinned_by == {"job-1", "job-2"}  # type: ignore[union-attr]
    with pytest.raises(DocumentConflictError) as refused:
        repository.pin(job_pin(awaiting.document_id, "job-3", check_at=LATER))
    assert refused.value.current == awaiting
    with pytest.raises(DocumentConflictError) as missing:
        repository.pin(job_pin(document_record().document_id, "job-3", check_at=LATER))
    assert missing.value.current is None

    repository.unpin(OWNER, ready.document_id, "job-1")
    repository.unpin(OWNER, ready.document_id, "job-1")  # a redelivered terminal record
    repository.unpin(OWNER, ready.document_id, "job-2")
    repository.unpin(OWNER, document_record().document_id, "job-9")  # no such document: nothing
    assert repository.get(OWNER, ready.document_id).pinned_by == frozenset()  # type: ignore[union-attr]
    assert repository.get(OWNER, document_record().document_id) is None
    repository.delete(OWNER, ready.document_id)


def test_pinned_documents_are_due_for_a_check_until_no_pin_is_left(repository: DocumentRepository) -> None:
    ready = document_record(status=DocumentStatus.READY, upload=UPLOAD, ready=READY_FACTS)
    repository.create(ready)
    shard = pin_shard(ready.document_id)
    repository.pin(job_pin(ready.document_id, "job-1", check_at=LATER))

    assert repository.pins_due(shard, CREATED, 10) == []  # not due yet
    assert repository.pins_due(shard, LATER, 10) == [(OWNER, ready.document_id)]
    repository.reschedule_pin_check(OWNER, ready.document_id, LATER + timedelta(minutes=5))
    assert repository.pins_due(shard, LATER, 10) == []
    repository.unpin(OWNER, ready.document_id, "job-1")
    due = LATER + timedelta(minutes=5)
    assert repository.pins_due(shard, due, 10) == [(OWNER, ready.document_id)]  # until the sweeper looks
    repository.reschedule_pin_check(OWNER, ready.document_id, due + timedelta(minutes=5))
    assert repository.pins_due(shard, due + timedelta(days=1), 10) == []  # no pin left: out of the index
    repository.reschedule_pin_check(OWNER, document_record().document_id, due)  # gone: nothing


def test_a_pin_keeps_the_document_until_its_job_expires_never_less(repository: DocumentRepository) -> None:
    """keptUntil (and the TTL) rise to the latest pinning job's expiry; an earlier one, or one
    inside the retention, changes neither; an unpin leaves them."""
    ready = document_record(status=DocumentStatus.READY, upload=UPLOAD, ready=READY_FACTS)
    repository.create(ready)
    inside = ready.expires_at - timedelta(days=1)
    first, second = ready.expires_at + timedelta(days=10), ready.expires_at + timedelta(days=20)

    repository.pin(job_pin(ready.document_id, "job-0", keep_until=inside))
    assert repository.get(OWNER, ready.document_id).kept_until is None  # type: ignore[union-attr]
    repository.pin(job_pin(ready.document_id, "job-1", keep_until=first))
    repository.pin(job_pin(ready.document_id, "job-2", keep_until=second))
    repository.pin(job_pin(ready.document_id, "job-1", keep_until=first))  # a retried submit
    repository.unpin(OWNER, ready.document_id, "job-2")

    stored = repository.get(OWNER, ready.document_id)
    assert stored is not None
    assert stored.pinned_by == {"job-0", "job-1"}
    assert (stored.expires_at, stored.kept_until, stored.lives_until) == (ready.expires_at, second, second)


def test_past_its_retention_a_document_takes_no_pin_but_is_kept_for_its_pins(
    repository: DocumentRepository,
) -> None:
    ready = document_record(status=DocumentStatus.READY, upload=UPLOAD, ready=READY_FACTS)
    repository.create(ready)
    kept = ready.expires_at + timedelta(days=29)
    repository.pin(
        job_pin(ready.document_id, "job-1", now=ready.expires_at - timedelta(days=1), keep_until=kept)
    )
    past = ready.expires_at + timedelta(days=1)

    with pytest.raises(DocumentConflictError) as refused:
        repository.pin(job_pin(ready.document_id, "job-2", now=past, keep_until=past + timedelta(days=30)))
    assert refused.value.current == repository.get(OWNER, ready.document_id)
    assert [d.document_id for d in repository.list_page(OWNER, 10, None, past).items] == [ready.document_id]
    assert repository.list_page(OWNER, 10, None, kept).items == []  # the pins' extension ended
    repository.unpin(OWNER, ready.document_id, "job-1")
    assert repository.list_page(OWNER, 10, None, past).items == []  # unpinned past its expiry: gone


def test_the_items_ttl_is_the_later_of_its_expiry_and_its_pins(
    documents: DocumentResources, moto_endpoint: str
) -> None:
    """What DynamoDB's TTL (and local mode's reaper) reads: never before the job's expiry."""
    client = _client("dynamodb", moto_endpoint)
    repository = DynamoDocumentRepository(client, documents.table)
    ready = document_record(status=DocumentStatus.READY, upload=UPLOAD, ready=READY_FACTS)
    repository.create(ready)
    keep = ready.expires_at + timedelta(days=3, milliseconds=1)

    def ttl() -> int:
        item = client.get_item(TableName=documents.table, Key=document_key(OWNER, ready.document_id))["Item"]
        return int(item[r.TTL_ATTRIBUTE]["N"])

    assert ttl() == int(ready.expires_at.timestamp())
    repository.pin(job_pin(ready.document_id, "job-1", keep_until=keep))
    assert ttl() == int(keep.timestamp()) + 1  # rounded up: TTL never removes it before
    repository.pin(job_pin(ready.document_id, "job-2", keep_until=keep - timedelta(days=1)))
    assert ttl() == int(keep.timestamp()) + 1


# --- the objects ---------------------------------------------------------------------------------


@dataclass
class ObjectsUnderTest:
    """A DocumentObjects and the way an upload (a presigned POST) lands in it."""

    objects: DocumentObjects
    upload: Any  # (owner, document_id, data) -> Upload


@pytest.fixture(params=["fake", "s3"])
def objects(request: pytest.FixtureRequest) -> ObjectsUnderTest:
    if request.param == "fake":
        fake = InMemoryDocumentObjects()
        return ObjectsUnderTest(fake, fake.upload)
    resources: DocumentResources = request.getfixturevalue("documents")
    s3 = _client("s3", request.getfixturevalue("moto_endpoint"))

    def upload(owner: Caller, document_id: str, data: bytes) -> Upload:
        key = object_key(owner, document_id, DocumentPart.ORIGINAL)
        written = s3.put_object(Bucket=resources.bucket, Key=key, Body=data)
        return Upload(etag=written["ETag"].strip('"'), bytes=len(data))

    return ObjectsUnderTest(S3DocumentObjects(lambda: s3, resources.bucket), upload)


def test_the_original_is_read_by_the_upload_that_wrote_it(objects: ObjectsUnderTest) -> None:
    document_id = document_record().document_id
    first = objects.upload(OWNER, document_id, b"first file")

    assert objects.objects.read_original(OWNER, document_id, first) == b"first file"

    objects.upload(OWNER, document_id, b"second file")
    with pytest.raises(OriginalChangedError):
        objects.objects.read_original(OWNER, document_id, first)
    with pytest.raises(OriginalMissingError):
        objects.objects.read_original(OWNER, document_record().document_id, first)


def test_the_text_is_stored_beside_the_original(objects: ObjectsUnderTest) -> None:
    document_id = document_record().document_id
    text = "Grüße\n".encode()

    assert objects.objects.read_text(OWNER, document_id) is None
    objects.objects.put_text(OWNER, document_id, text, hashlib.sha256(text).hexdigest())

    assert objects.objects.read_text(OWNER, document_id) == text
    assert objects.objects.read_text(Caller(tenant="other", sub="x"), document_id) is None


def test_delete_removes_the_original_and_the_text(objects: ObjectsUnderTest) -> None:
    document_id = document_record().document_id
    upload = objects.upload(OWNER, document_id, b"file")
    objects.objects.put_text(OWNER, document_id, b"text", hashlib.sha256(b"text").hexdigest())

    objects.objects.delete(OWNER, document_id)
    objects.objects.delete(OWNER, document_id)  # again: harmless

    assert objects.objects.read_text(OWNER, document_id) is None
    with pytest.raises(OriginalMissingError):
        objects.objects.read_original(OWNER, document_id, upload)


def test_the_s3_text_carries_its_sha256(documents: DocumentResources, moto_endpoint: str) -> None:
    s3 = _client("s3", moto_endpoint)
    document_id = document_record().document_id
    text = b"some text"
    digest = hashlib.sha256(text).hexdigest()

    S3DocumentObjects(lambda: s3, documents.bucket).put_text(OWNER, document_id, text, digest)

    head = s3.head_object(Bucket=documents.bucket, Key=object_key(OWNER, document_id, DocumentPart.TEXT))
    assert head["Metadata"] == {"sha256": digest}
    assert head["ContentType"] == "text/plain; charset=utf-8"


# --- the DLQ --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fake", "sqs"])
def test_a_parked_message_keeps_its_body_and_reason(kind: str, request: pytest.FixtureRequest) -> None:
    if kind == "fake":
        fake = RecordingDeadLetters()
        fake.dead_letter("a body", "unparseable")
        assert fake.parked == [("a body", "unparseable")]
        return
    resources: DocumentResources = request.getfixturevalue("documents")
    sqs = _client("sqs", request.getfixturevalue("moto_endpoint"))

    SqsDeadLetterQueue(lambda: sqs, resources.dlq_url).dead_letter("a body", "unparseable")

    received = sqs.receive_message(
        QueueUrl=resources.dlq_url, MessageAttributeNames=["All"], WaitTimeSeconds=1
    )
    parked = [(m["Body"], m["MessageAttributes"]["reason"]["StringValue"]) for m in received["Messages"]]
    assert parked == [("a body", "unparseable")]
