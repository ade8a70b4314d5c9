"""One contract for the payload store: the in-memory fake and the DynamoDB/S3 adapter (on moto)
agree, so the worker's unit tests with the fake say what the worker does against AWS. Both read
results through `get_result`, so a fault there (an S3 AccessDenied, a throttled read) reaches the
worker's adoption of an earlier claim's result and its conflicting writes alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from shared.errors import StorageUnavailableError
from shared.ids import new_job_id
from shared.job import BlobLocation, JobInput, JobResult, Usage
from shared.ports import PayloadStore
from tests.fakes import InMemoryPayloadStore
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

LATER = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=24)
LOCATIONS: tuple[BlobLocation, ...] = ("item", "s3")


@pytest.fixture(params=["fake", "adapter"])
def store(request: pytest.FixtureRequest) -> PayloadStore:
    if request.param == "fake":
        return InMemoryPayloadStore()
    resources: TestResources = request.getfixturevalue("resources")
    return Storage(resources).payloads()


def _result(job_id: str, output: str, tokens: int = 5) -> JobResult:
    return JobResult(job_id=job_id, output=output, usage=Usage(input_tokens=tokens, output_tokens=1))


@pytest.mark.parametrize("location", LOCATIONS)
def test_a_result_is_written_once_and_the_first_one_comes_back(
    store: PayloadStore, location: BlobLocation
) -> None:
    job_id = new_job_id()
    first, second = _result(job_id, "first", 5), _result(job_id, "second", 9)

    assert store.put_result(first, location, LATER) == first
    assert store.put_result(second, location, LATER) == first
    assert store.get_result(job_id, location) == first
    assert store.find_result(job_id) == (location, first)


def test_no_result_is_found_for_a_job_without_one(store: PayloadStore) -> None:
    job_id = new_job_id()
    store.put_input(JobInput(job_id=job_id, text="only an input"), "item", LATER)

    assert store.find_result(job_id) is None
    assert store.get_input(job_id, "item") == JobInput(job_id=job_id, text="only an input")


@pytest.mark.parametrize("location", LOCATIONS)
def test_a_fault_reading_results_reaches_find_result_and_a_conflicting_write(
    store: PayloadStore, location: BlobLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a stored result, and reads of results that fail from now on (S3 AccessDenied, throttling)
    job_id = new_job_id()
    store.put_result(_result(job_id, "stored"), location, LATER)

    def unreadable(job_id: str, location: BlobLocation) -> JobResult | None:
        raise StorageUnavailableError("the result cannot be read")

    monkeypatch.setattr(store, "get_result", unreadable)

    # Then the search for an earlier result fails with it (never "no result": that would pay the
    # model again), and so does a second write that must hand back the stored one
    with pytest.raises(StorageUnavailableError):
        store.find_result(job_id)
    with pytest.raises(StorageUnavailableError):
        store.put_result(_result(job_id, "another"), location, LATER)
