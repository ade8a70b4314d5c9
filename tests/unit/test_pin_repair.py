"""The sweeper's repair of document pins on fakes: a pin whose job ended (its unpin lost) or whose
job was never written is removed; a running job's pin stays and is looked at again later; a
document with no pin left leaves the index."""

from __future__ import annotations

from datetime import timedelta

from shared.adapters.dynamodb_documents import pin_shard
from shared.documents.pin_repair import repair_pins
from shared.documents.record import ReadyFacts, Upload
from shared.documents.types import DocumentStatus
from shared.lifecycle import JobStatus
from tests.document_fakes import CREATED, OWNER, InMemoryDocumentRepository, document_record, job_pin
from tests.fakes import InMemoryJobRepository, job_record

GRACE = timedelta(minutes=15)


def _pinned(documents: InMemoryDocumentRepository, *job_ids: str) -> str:
    document = document_record(
        status=DocumentStatus.READY,
        upload=Upload(etag="e", bytes=10),
        ready=ReadyFacts(pages=None, bytes=10, text_bytes=10, sha256="0" * 64),
    )
    documents.create(document)
    for job_id in job_ids:
        documents.pin(job_pin(document.document_id, job_id, check_at=CREATED + GRACE))
    return document.document_id


def _repair(documents: InMemoryDocumentRepository, jobs: InMemoryJobRepository, at: timedelta) -> int:
    report = repair_pins(documents, jobs.get_job, now=CREATED + at, grace=GRACE, shards=4, per_shard=10)
    assert report.errors == 0
    return report.unpinned


def test_ended_and_missing_jobs_lose_their_pins_and_running_ones_keep_them() -> None:
    documents, jobs = InMemoryDocumentRepository(), InMemoryJobRepository()
    ended = job_record(CREATED).model_copy(update={"status": JobStatus.SUCCEEDED})
    running = job_record(CREATED).model_copy(update={"status": JobStatus.RUNNING})
    for job in (ended, running):
        jobs.jobs[job.job_id] = job
    document_id = _pinned(documents, ended.job_id, running.job_id, "never-written")

    assert _repair(documents, jobs, GRACE - timedelta(seconds=1)) == 0  # not due yet
    assert _repair(documents, jobs, GRACE) == 2

    stored = documents.get(OWNER, document_id)
    assert stored is not None
    assert stored.pinned_by == {running.job_id}
    assert documents.pin_checks[(OWNER.owner_key, document_id)] == CREATED + 2 * GRACE


def test_a_document_with_no_pin_left_leaves_the_index() -> None:
    documents, jobs = InMemoryDocumentRepository(), InMemoryJobRepository()
    document_id = _pinned(documents, "job-1")
    documents.unpin(OWNER, document_id, "job-1")  # the notifier did its part

    assert _repair(documents, jobs, GRACE) == 0
    assert documents.pins_due(pin_shard(document_id), CREATED + timedelta(days=1), 10) == []


def test_an_expired_job_loses_its_pin_though_ttl_has_not_removed_it() -> None:
    """A job is gone at its expiresAt (the bound a pin keeps its document for): a pin it still
    holds then is removed, whatever status its undeleted item shows."""
    documents, jobs = InMemoryDocumentRepository(), InMemoryJobRepository()
    expired = job_record(CREATED - timedelta(days=30), status=JobStatus.RUNNING)
    running = job_record(CREATED, status=JobStatus.RUNNING)
    for job in (expired, running):
        jobs.jobs[job.job_id] = job
    document_id = _pinned(documents, expired.job_id, running.job_id)

    assert _repair(documents, jobs, GRACE) == 1

    stored = documents.get(OWNER, document_id)
    assert stored is not None
    assert stored.pinned_by == {running.job_id}
