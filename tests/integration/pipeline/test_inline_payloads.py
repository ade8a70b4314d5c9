"""Small inputs and results ride in the job item (DESIGN.md, "Cost discipline"), through the same
handlers, against moto: no item of their own, readable as any other, and a Failed job's input is
kept apart for a redrive once the terminal write removes it from the job."""

from __future__ import annotations

import pytest

from shared import resources as r
from shared.adapters.dynamo_items import INPUT_BODY_ATTRIBUTE, RESULT_BODY_ATTRIBUTE
from shared.adapters.item_size import item_size
from tests.support.pipeline import Pipeline
from tests.support.storage import Storage

pytestmark = pytest.mark.integration


def _body(text: str) -> dict[str, str | dict[str, str]]:
    return {"operation": "summarize", "input": {"text": text}}


def test_a_short_job_is_one_item_from_submit_to_result(pipeline: Pipeline) -> None:
    storage = Storage(pipeline.resources)
    job_id = pipeline.submit(_body("A short text. It fits in the job item."), key="inline-1")["body"]["jobId"]
    submitted = storage.item(job_id, "JOB")
    assert submitted is not None
    assert INPUT_BODY_ATTRIBUTE in submitted

    [final] = pipeline.terminal(job_id)

    # The input went with the terminal write, the result came with it: one item all along
    job = storage.item(job_id, "JOB")
    assert job is not None
    assert final["status"] == "Succeeded"
    assert (job["inputLocation"]["S"], job["resultLocation"]["S"]) == ("job", "job")
    assert INPUT_BODY_ATTRIBUTE not in job
    assert RESULT_BODY_ATTRIBUTE in job
    assert item_size(job) < 1024
    assert (storage.item(job_id, "INPUT"), storage.item(job_id, "RESULT")) == (None, None)
    assert storage.object_keys() == []
    # ...and its result reads as any other, with the usage the status shows
    result = pipeline.result(job_id)
    assert result["statusCode"] == 200
    assert result["body"]["output"] == "A short text. It fits in the job item."
    assert result["body"]["usage"] == final["usage"]


def test_a_failed_short_job_keeps_its_input_apart_for_a_redrive(pipeline: Pipeline) -> None:
    storage = Storage(pipeline.resources)
    text = "Refuse this. [[fault:content_policy]]"
    job_id = pipeline.submit(_body(text), key="inline-2")["body"]["jobId"]

    [final] = pipeline.terminal(job_id)

    # The terminal write moved the input out of the job item, into an item that expires with the
    # 24 h retention that follows a job's end (so `outlast ops jobs redrive` can run it again)
    job = storage.item(job_id, "JOB")
    kept = storage.item(job_id, "INPUT")
    assert final["status"] == "Failed"
    assert final["error"]["code"] == "content_policy"
    assert job is not None
    assert kept is not None
    assert job["inputLocation"]["S"] == "item"
    assert INPUT_BODY_ATTRIBUTE not in job
    stored = storage.stored_input(job_id)
    assert stored is not None
    assert stored.text == text
    assert int(kept[r.TTL_ATTRIBUTE]["N"]) < int(job[r.TTL_ATTRIBUTE]["N"])


def test_a_canceled_short_job_leaves_no_input_anywhere(pipeline: Pipeline) -> None:
    storage = Storage(pipeline.resources)
    job_id = pipeline.submit(_body("Cancel me before I run."), key="inline-3")["body"]["jobId"]

    canceled = pipeline.cancel(job_id)

    job = storage.item(job_id, "JOB")
    assert canceled["body"]["status"] == "Canceled"
    assert job is not None
    assert INPUT_BODY_ATTRIBUTE not in job
    assert storage.item(job_id, "INPUT") is None
