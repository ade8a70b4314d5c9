"""The ingest function through its Lambda handler, against moto: S3 notifications on SQS in,
documents Ready or Rejected (with their codes), text beside the original, poison on the DLQ.

Every file is made by the tests (tests/support/documents.py); extraction runs in the real child.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from functions.ingest.handler import lambda_handler
from shared.adapters.dynamodb_documents import DynamoDocumentRepository
from shared.documents.keys import DocumentPart, object_key
from shared.documents.record import DocumentRecord
from shared.documents.types import ContentType, DocumentStatus, RejectCode
from shared.job import Caller
from tests.document_fakes import document_record
from tests.support import documents as files
from tests.support.aws import REGION, DocumentResources, create_document_resources
from tests.support.events import s3_object_created, s3_test_event, sqs_batch
from tests.support.lambda_context import FakeLambdaContext

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
OWNER = Caller(tenant="user:3b7c1d2e", sub="3b7c1d2e")  # a personal tenant: `:` is encoded in events
# Long enough for an extraction's wall-clock limit (EXTRACTION_TIMEOUT_SECONDS, 90 by default).
INVOCATION_SECONDS = 120


@dataclass
class Ingest:
    """One test's documents resources and clients, and the handler driven by their events."""

    resources: DocumentResources
    s3: Any
    sqs: Any
    repository: DynamoDocumentRepository

    def create(self, content_type: ContentType, declared_bytes: int) -> DocumentRecord:
        document = document_record(OWNER, content_type=content_type, declared_bytes=declared_bytes)
        self.repository.create(document)
        return document

    def upload(self, document: DocumentRecord, data: bytes) -> str:
        """Put the file at the document's key; the notification S3 then sends."""
        key = object_key(document.owner, document.document_id, DocumentPart.ORIGINAL)
        written = self.s3.put_object(Bucket=self.resources.bucket, Key=key, Body=data)
        return s3_object_created(self.resources.bucket, key, size=len(data), etag=written["ETag"])

    def handle(self, *bodies: str, seconds: float = INVOCATION_SECONDS) -> list[str]:
        """Invoke the handler with one SQS record per body; the failed records' message ids."""
        event = sqs_batch(*bodies)
        response = lambda_handler(event, FakeLambdaContext(timeout_seconds=seconds))
        failed = [item["itemIdentifier"] for item in response["batchItemFailures"]]
        ids = [record["messageId"] for record in event["Records"]]
        return [f"record {ids.index(message_id)}" for message_id in failed]

    def document(self, document: DocumentRecord) -> DocumentRecord:
        stored = self.repository.get(document.owner, document.document_id)
        assert stored is not None
        return stored

    def text(self, document: DocumentRecord) -> bytes | None:
        key = object_key(document.owner, document.document_id, DocumentPart.TEXT)
        try:
            return bytes(self.s3.get_object(Bucket=self.resources.bucket, Key=key)["Body"].read())
        except self.s3.exceptions.NoSuchKey:
            return None

    def parked(self) -> list[tuple[str, str]]:
        received = self.sqs.receive_message(
            QueueUrl=self.resources.dlq_url, MessageAttributeNames=["All"], MaxNumberOfMessages=10
        )
        return [
            (message["Body"], message["MessageAttributes"]["reason"]["StringValue"])
            for message in received.get("Messages", [])
        ]


@pytest.fixture
def ingest(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Ingest:
    resources = create_document_resources(moto_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    for name, value in resources.environment().items():
        monkeypatch.setenv(name, value)
    dynamodb = boto3.client("dynamodb", endpoint_url=moto_endpoint, region_name=REGION)
    return Ingest(
        resources,
        boto3.client("s3", endpoint_url=moto_endpoint, region_name=REGION),
        boto3.client("sqs", endpoint_url=moto_endpoint, region_name=REGION),
        DynamoDocumentRepository(dynamodb, resources.table),
    )


# Each file the tests make, the type its upload declares, and how its document ends.
FILES = {
    "multi-page-pdf": (ContentType.PDF, files.pdf(files.numbered_pages(3)), DocumentStatus.READY),
    "300-page-pdf": (ContentType.PDF, files.pdf(files.numbered_pages(300)), DocumentStatus.READY),
    "docx": (ContentType.DOCX, files.docx(["A heading", "A paragraph."]), DocumentStatus.READY),
    "markdown": (ContentType.MARKDOWN, files.MARKDOWN.encode(), DocumentStatus.READY),
    "encrypted-pdf": (ContentType.PDF, files.pdf(["secret"], password="pw"), RejectCode.DOCUMENT_ENCRYPTED),
    "pdf-without-text": (ContentType.PDF, files.pdf([None, None]), RejectCode.DOCUMENT_HAS_NO_TEXT),
    "pdf-declared-as-markdown": (ContentType.MARKDOWN, files.pdf(["x"]), RejectCode.UNSUPPORTED_TYPE),
    "docx-declared-as-pdf": (ContentType.PDF, files.docx(["x"]), RejectCode.UNSUPPORTED_TYPE),
    "docx-zip-bomb": (ContentType.DOCX, files.docx_bomb(100 * MIB), RejectCode.DOCUMENT_TOO_LARGE),
}


@pytest.mark.parametrize("name", FILES, ids=list(FILES))
def test_each_file_ends_ready_or_rejected_with_its_code(ingest: Ingest, name: str) -> None:
    # Given a document declared as a type, and its file uploaded
    content_type, data, outcome = FILES[name]
    document = ingest.create(content_type, declared_bytes=len(data))

    # When S3's notification reaches the ingest
    assert ingest.handle(ingest.upload(document, data)) == []

    # Then the document is Ready with its text beside the original, or Rejected with its code
    stored = ingest.document(document)
    text = ingest.text(document)
    if outcome is DocumentStatus.READY:
        assert stored.status is DocumentStatus.READY
        assert stored.ready is not None
        assert text is not None
        assert stored.ready.sha256 == hashlib.sha256(text).hexdigest()
        assert (stored.ready.bytes, stored.ready.text_bytes) == (len(data), len(text))
    else:
        assert stored.status is DocumentStatus.REJECTED
        assert stored.error is not None
        assert stored.error.code is outcome
        assert text is None


def test_a_300_page_pdf_has_its_pages_counted_and_every_page_in_its_text(ingest: Ingest) -> None:
    data = files.pdf(files.numbered_pages(300))
    document = ingest.create(ContentType.PDF, declared_bytes=len(data))

    ingest.handle(ingest.upload(document, data))

    stored = ingest.document(document)
    assert stored.ready is not None
    assert stored.ready.pages == 300
    text = (ingest.text(document) or b"").decode()
    assert all(f"Page {n} of 300." in text for n in (1, 150, 300))


def test_a_file_over_its_declared_size_is_rejected_unread(ingest: Ingest) -> None:
    # moto stores a POST that breaks its policy's content-length-range; the ingest catches it
    data = files.pdf(files.numbered_pages(2))
    document = ingest.create(ContentType.PDF, declared_bytes=len(data) - 1)

    ingest.handle(ingest.upload(document, data))

    stored = ingest.document(document)
    assert stored.error is not None
    assert stored.error.code is RejectCode.DOCUMENT_TOO_LARGE
    assert ingest.text(document) is None


def test_a_redelivered_event_and_a_later_upload_change_nothing(ingest: Ingest) -> None:
    # Given a document made Ready from its first upload
    first = files.docx(["The first upload"])
    document = ingest.create(ContentType.DOCX, declared_bytes=MIB)
    first_event = ingest.upload(document, first)
    ingest.handle(first_event)
    ready = ingest.document(document)

    # When the same event comes again, and then a second upload's (the POST was still valid)
    ingest.handle(first_event)
    ingest.handle(ingest.upload(document, files.docx(["A second upload"])))

    # Then the document and its text are those of the first upload
    assert ingest.document(document) == ready
    assert ingest.text(document) == b"The first upload"


def test_the_test_event_is_ignored(ingest: Ingest) -> None:
    assert ingest.handle(s3_test_event(ingest.resources.bucket)) == []
    assert ingest.parked() == []


def test_poison_goes_to_the_dlq_and_the_batch_carries_on(ingest: Ingest) -> None:
    # Given a batch: an unparseable body, a key outside the documents prefix, and a real upload
    data = files.MARKDOWN.encode()
    document = ingest.create(ContentType.MARKDOWN, declared_bytes=len(data))
    outside = s3_object_created(ingest.resources.bucket, "inputs/x/original", size=3, etag="e")
    bodies = ("not a notification", outside, ingest.upload(document, data))

    # When the ingest handles it
    failed = ingest.handle(*bodies)

    # Then nothing is retried: the poison is parked with its reasons, the upload is ingested
    assert failed == []
    assert sorted(ingest.parked()) == sorted(
        [("not a notification", "unparseable"), (outside, "not_a_document_key")]
    )
    assert ingest.document(document).status is DocumentStatus.READY


def test_a_record_that_cannot_finish_in_time_is_reported_for_redelivery(ingest: Ingest) -> None:
    # Given an invocation with less time left than an extraction may take
    data = files.MARKDOWN.encode()
    document = ingest.create(ContentType.MARKDOWN, declared_bytes=len(data))
    body = ingest.upload(document, data)

    # Then its record is a batch item failure, and the document is untouched
    assert ingest.handle(body, seconds=30) == ["record 0"]
    assert ingest.document(document).status is DocumentStatus.AWAITING_UPLOAD

    # And a fresh invocation ingests it
    assert ingest.handle(body) == []
    assert ingest.document(document).status is DocumentStatus.READY
