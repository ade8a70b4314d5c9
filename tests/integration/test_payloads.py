"""The payload store against moto: inputs and results in an item when small, in S3 when large."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from shared import resources as r
from shared.clock import epoch_seconds
from shared.ids import new_job_id
from shared.job import BlobLocation, JobInput, JobResult
from tests.support import jobs
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration


@pytest.fixture
def storage(resources: TestResources) -> Storage:
    return Storage(resources)


def test_a_small_input_lives_in_an_item_beside_the_job(storage: Storage) -> None:
    # Given a small input
    payloads = storage.payloads()
    job_input = JobInput(job_id=new_job_id(), text="Short text. ✓", max_output_tokens=64, labels=("a", "b"))
    expires_at = jobs.now_millis() + timedelta(days=30)

    # When it is stored in an item and read back
    payloads.put_input(job_input, "item", expires_at)
    read = payloads.get_input(job_input.job_id, "item")

    # Then it round trips, in the job's partition, with a TTL and nothing in S3
    assert read == job_input
    item = storage.item(job_input.job_id, "INPUT")
    assert item is not None
    assert item[r.TYPE_ATTRIBUTE]["S"] == r.INPUT_ITEM_TYPE
    assert int(item[r.TTL_ATTRIBUTE]["N"]) == epoch_seconds(expires_at)
    assert storage.object_keys() == []


def test_a_large_input_lives_in_s3(storage: Storage) -> None:
    # Given an input far over the inline limit
    payloads = storage.payloads()
    job_input = JobInput(job_id=new_job_id(), text="é" * 100_000)

    # When it is stored in S3 and read back
    payloads.put_input(job_input, "s3", jobs.now_millis() + timedelta(days=30))
    read = payloads.get_input(job_input.job_id, "s3")

    # Then it round trips through one object and no item
    assert read == job_input
    assert storage.object_keys() == [f"{r.INPUT_PREFIX}{job_input.job_id}.json"]
    assert storage.item(job_input.job_id, "INPUT") is None


@pytest.mark.parametrize("location", ["item", "s3"])
def test_a_result_round_trips(storage: Storage, location: BlobLocation) -> None:
    # Given a result
    payloads = storage.payloads()
    result = JobResult(job_id=new_job_id(), output="The summary. 概要")

    # When it is stored and read back
    payloads.put_result(result, location, jobs.now_millis() + timedelta(days=30))

    # Then it is the same result, and writing it again is harmless
    assert payloads.get_result(result.job_id, location) == result
    payloads.put_result(result, location, jobs.now_millis() + timedelta(days=30))
    assert payloads.get_result(result.job_id, location) == result


@pytest.mark.parametrize("location", ["item", "s3"])
def test_a_missing_payload_reads_as_none(storage: Storage, location: BlobLocation) -> None:
    # Given nothing stored for a job
    payloads = storage.payloads()
    job_id = new_job_id()

    # When its input and result are read
    # Then both are simply absent
    assert payloads.get_input(job_id, location) is None
    assert payloads.get_result(job_id, location) is None


def test_expiring_an_input_sets_its_ttl(storage: Storage) -> None:
    # Given a stored input
    payloads = storage.payloads()
    job_input = JobInput(job_id=new_job_id(), text="text")
    payloads.put_input(job_input, "item", jobs.now_millis() + timedelta(days=30))

    # When the job ends and its input is given 24 hours
    at = jobs.now_millis() + timedelta(hours=24)
    payloads.set_input_expiry(job_input.job_id, "item", at)

    # Then the item's TTL says so and the input is still readable until then
    item = storage.item(job_input.job_id, "INPUT")
    assert item is not None
    assert int(item[r.TTL_ATTRIBUTE]["N"]) == epoch_seconds(at)
    assert payloads.get_input(job_input.job_id, "item") == job_input


@pytest.mark.parametrize("location", ["item", "s3"])
def test_expiring_a_missing_input_is_harmless(storage: Storage, location: BlobLocation) -> None:
    # Given an input that is already gone
    payloads = storage.payloads()
    job_id = new_job_id()

    # When it is expired
    payloads.set_input_expiry(job_id, location, jobs.now_millis() + timedelta(hours=24))

    # Then nothing fails and no stub item or object appears
    assert storage.scan(storage.resources.jobs_table) == []
    assert storage.object_keys() == []
