"""Jobs on documents with in-memory ports: the input is exactly one of text and documentId; a
foreign or missing document is 404, one not Ready is 409 (with Retry-After while it ingests); the
text is planned as input.text would be; the document is pinned before the job is written, once
per job, kept as long as the job can exist, and the job records the text's SHA-256; a replay
returns the same job; past its retention a document takes no new job, even while pinned."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from functions.submit.dependencies import SubmitDependencies
from functions.submit.service import SubmitOutcome, submit_job
from shared.contract import SubmitRequest
from shared.documents.ports import DocumentPin
from shared.documents.record import ReadyFacts, Upload
from shared.documents.types import ContentType, DocumentStatus
from shared.errors import DocumentNotFoundError, DocumentNotReadyError
from shared.job import Caller
from tests.budget_fakes import InMemoryBudgetLedger
from tests.document_fakes import InMemoryDocumentObjects, InMemoryDocumentRepository, document_record
from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore
from tests.unit.test_submit_service import settings

ALICE = Caller(tenant="acme", sub="alice")
BOB = Caller(tenant="acme", sub="bob")
TEXT = "The quarterly report, from a document. " * 3


@pytest.fixture
def documents() -> InMemoryDocumentRepository:
    return InMemoryDocumentRepository()


@pytest.fixture
def objects() -> InMemoryDocumentObjects:
    return InMemoryDocumentObjects()


@pytest.fixture
def repository() -> InMemoryJobRepository:
    return InMemoryJobRepository()


@pytest.fixture
def deps(
    repository: InMemoryJobRepository,
    documents: InMemoryDocumentRepository,
    objects: InMemoryDocumentObjects,
) -> SubmitDependencies:
    return SubmitDependencies(
        settings=settings(),
        repository=repository,
        payloads=InMemoryPayloadStore(),
        clock=FakeClock(),
        budgets=InMemoryBudgetLedger(),
        documents=documents,
        document_objects=objects,
    )


def _ready(
    documents: InMemoryDocumentRepository,
    objects: InMemoryDocumentObjects,
    owner: Caller = ALICE,
    created_at: datetime | None = None,
) -> str:
    text = TEXT.encode()
    sha256 = hashlib.sha256(text).hexdigest()
    document = document_record(
        owner,
        content_type=ContentType.MARKDOWN,
        created_at=created_at or FakeClock().now(),
        status=DocumentStatus.READY,
        upload=Upload(etag="e", bytes=len(text)),
        ready=ReadyFacts(pages=None, bytes=len(text), text_bytes=len(text), sha256=sha256),
    )
    documents.create(document)
    objects.put_text(owner, document.document_id, text, sha256)
    return document.document_id


def _submit(
    deps: SubmitDependencies, document_id: str, caller: Caller = ALICE, key: str = "k"
) -> SubmitOutcome:
    body = {"operation": "summarize", "input": {"documentId": document_id}}
    return submit_job(deps, caller, SubmitRequest.model_validate(json.loads(json.dumps(body))), key)


@pytest.mark.parametrize("given", [{}, {"text": "x", "documentId": "0b8f6c1e-2a4d-4e7b-9c3f-5d6e7f8a9b0c"}])
def test_the_input_is_exactly_one_of_text_and_document_id(given: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SubmitRequest.model_validate({"operation": "summarize", "input": given})


def test_a_job_on_a_ready_document_reads_its_text_pins_it_and_records_its_sha256(
    deps: SubmitDependencies,
    documents: InMemoryDocumentRepository,
    objects: InMemoryDocumentObjects,
    repository: InMemoryJobRepository,
) -> None:
    document_id = _ready(documents, objects)

    job = _submit(deps, document_id).job

    assert job.document_id == document_id
    assert job.document_sha256 == hashlib.sha256(TEXT.encode()).hexdigest()
    stored = documents.get(ALICE, document_id)
    assert stored is not None
    assert stored.pinned_by == {job.job_id}
    written = repository.get_job(job.job_id)
    assert written is not None
    assert written.inline_input() is not None
    assert written.inline_input().text == TEXT  # type: ignore[union-attr]


def test_the_pin_comes_before_the_job_is_written(
    deps: SubmitDependencies, objects: InMemoryDocumentObjects, repository: InMemoryJobRepository
) -> None:
    seen: list[bool] = []

    class Watching(InMemoryDocumentRepository):
        def pin(self, pin: DocumentPin) -> None:
            seen.append(repository.get_job(pin.job_id) is None)
            super().pin(pin)

    watching = Watching()
    document_id = _ready(watching, objects)
    _submit(dataclasses.replace(deps, documents=watching), document_id)

    assert seen == [True]


def test_a_replay_returns_the_same_job_and_pins_once(
    deps: SubmitDependencies, documents: InMemoryDocumentRepository, objects: InMemoryDocumentObjects
) -> None:
    document_id = _ready(documents, objects)

    first = _submit(deps, document_id)
    again = _submit(deps, document_id)

    assert again.replayed is True
    assert again.job.job_id == first.job.job_id
    assert documents.get(ALICE, document_id).pinned_by == {first.job.job_id}  # type: ignore[union-attr]


def test_another_callers_or_a_missing_document_is_not_found_and_leaves_no_claim(
    deps: SubmitDependencies,
    documents: InMemoryDocumentRepository,
    objects: InMemoryDocumentObjects,
    repository: InMemoryJobRepository,
) -> None:
    document_id = _ready(documents, objects)

    with pytest.raises(DocumentNotFoundError):
        _submit(deps, document_id, caller=BOB)
    with pytest.raises(DocumentNotFoundError):
        _submit(deps, "0b8f6c1e-2a4d-4e7b-9c3f-5d6e7f8a9b0c")

    assert documents.get(ALICE, document_id).pinned_by == frozenset()  # type: ignore[union-attr]
    # The same key works once the caller names a document of theirs: no claim was left behind.
    assert _submit(deps, _ready(documents, objects, BOB), caller=BOB).replayed is False


def test_a_document_still_ingesting_is_not_ready_with_retry_after_and_a_rejected_one_without(
    deps: SubmitDependencies, documents: InMemoryDocumentRepository
) -> None:
    awaiting = document_record(ALICE, created_at=FakeClock().now())
    documents.create(awaiting)
    with pytest.raises(DocumentNotReadyError) as waiting:
        _submit(deps, awaiting.document_id)
    assert waiting.value.retry_after == deps.settings.poll_after_seconds

    rejected = document_record(ALICE, created_at=FakeClock().now(), status=DocumentStatus.REJECTED)
    documents.create(rejected)
    with pytest.raises(DocumentNotReadyError) as never:
        _submit(deps, rejected.document_id, key="k2")
    assert never.value.retry_after is None


def test_text_that_is_not_the_frozen_text_is_not_read(
    deps: SubmitDependencies, documents: InMemoryDocumentRepository, objects: InMemoryDocumentObjects
) -> None:
    document_id = _ready(documents, objects)
    objects.put_text(ALICE, document_id, b"something else", "x")

    with pytest.raises(DocumentNotFoundError):
        _submit(deps, document_id)


def test_the_pin_keeps_the_document_as_long_as_the_job_can_exist(
    deps: SubmitDependencies, documents: InMemoryDocumentRepository, objects: InMemoryDocumentObjects
) -> None:
    """A document in the last day of its retention, pinned by a job: it lives on (its TTL) until
    the job's own expiry, and reads past its expiresAt work while the pin holds."""
    now = FakeClock().now()
    document_id = _ready(documents, objects, created_at=now - timedelta(days=29))
    original = documents.get(ALICE, document_id)
    assert original is not None

    job = _submit(deps, document_id).job

    stored = documents.get(ALICE, document_id)
    assert stored is not None
    assert stored.expires_at == original.expires_at  # the retention end: no new job after it
    assert stored.kept_until == job.expires_at
    assert stored.lives_until == job.expires_at > original.expires_at
    assert not stored.is_expired(original.expires_at + timedelta(days=10))
    assert stored.is_expired(job.expires_at)


def test_a_document_past_its_retention_takes_no_new_job_even_while_pinned(
    deps: SubmitDependencies, documents: InMemoryDocumentRepository, objects: InMemoryDocumentObjects
) -> None:
    """Its pins keep it for the jobs already accepted; a new one would extend it past what the
    bucket's lifecycle rule allows (retention + job retention from creation)."""
    clock = FakeClock()
    document_id = _ready(documents, objects, created_at=clock.now() - timedelta(days=29))
    _submit(deps, document_id)
    clock.advance(days=2)

    with pytest.raises(DocumentNotFoundError):
        _submit(dataclasses.replace(deps, clock=clock), document_id, key="later")
