"""Every job write says what kind it was (`w`) and counts itself (`revision`): the stream's consumers
read both. Checked on the DynamoDB adapter (moto) and, for the same moves, on the in-memory fake."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from shared.ports import JobRepository, Lease
from tests.fakes import InMemoryJobRepository, InMemoryPayloadStore
from tests.support import jobs
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration


def _moves(repository: JobRepository, payloads: object) -> tuple[str, list[int]]:
    job = jobs.create(repository, jobs.new_job())
    revisions = [job.revision]
    running = jobs.claim(repository, job.job_id)
    revisions.append(running.revision)
    assert running.lease_token is not None
    beat = repository.heartbeat(
        job.job_id, Lease(token=running.lease_token, expires_at=jobs.now_millis() + timedelta(seconds=60))
    )
    revisions.append(beat.revision)
    done = jobs.succeed(repository, payloads, beat, output="ok")  # type: ignore[arg-type]
    revisions.append(done.revision)
    return job.job_id, revisions


def test_the_adapter_writes_w_and_counts_revisions(resources: TestResources) -> None:
    storage = Storage(resources)
    repository = storage.repository()

    job_id, revisions = _moves(repository, storage.payloads())

    assert revisions == [1, 2, 3, 4]
    item = storage.item(job_id, "JOB")
    assert item is not None
    assert item["w"] == {"S": "terminal"}
    assert item["revision"] == {"N": "4"}
    assert repository.get_job(job_id).revision == 4  # type: ignore[union-attr]


def test_each_write_sets_its_kind(resources: TestResources) -> None:
    storage = Storage(resources)
    repository = storage.repository()
    job = jobs.create(repository, jobs.new_job())
    kinds = [storage.item(job.job_id, "JOB")["w"]["S"]]  # type: ignore[index]
    running = jobs.claim(repository, job.job_id)
    kinds.append(storage.item(job.job_id, "JOB")["w"]["S"])  # type: ignore[index]
    assert running.lease_token is not None
    repository.heartbeat(job.job_id, Lease(token=running.lease_token, expires_at=jobs.now_millis()))
    kinds.append(storage.item(job.job_id, "JOB")["w"]["S"])  # type: ignore[index]

    assert kinds == ["submit", "claim", "heartbeat"]


def test_the_fake_counts_and_names_the_same_writes() -> None:
    repository = InMemoryJobRepository()

    job_id, revisions = _moves(repository, InMemoryPayloadStore())

    assert revisions == [1, 2, 3, 4]
    assert repository.write_kinds[job_id] == "terminal"
