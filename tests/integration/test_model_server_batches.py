"""The local model server's Batch API through the real `openai` SDK over a real socket: a batch
is in progress until `batch_seconds` have passed, then completed with an output file of chat
completions named by `custom_id`; `[[fault:batch_expired]]` expires its line; cancel runs nothing;
the list pages newest first with each batch's metadata, and runs nothing."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from openai import NotFoundError, OpenAI

from outlast.local.model_server import ModelServer

pytestmark = pytest.mark.integration

POLL_LIMIT_SECONDS = 30.0


@pytest.fixture
def client() -> Iterator[OpenAI]:
    with ModelServer(batch_seconds=0.2) as server:
        yield OpenAI(api_key="local", base_url=server.url, max_retries=0)


def jsonl(*texts: str) -> bytes:
    lines = [
        {
            "custom_id": f"job-{n}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "gpt-4o-mini",
                "messages": [{"role": "user", "content": text}],
                "max_tokens": 50,
            },
        }
        for n, text in enumerate(texts)
    ]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def create(client: OpenAI, *texts: str, metadata: dict[str, str] | None = None) -> str:
    uploaded = client.files.create(file=("in.jsonl", io.BytesIO(jsonl(*texts))), purpose="batch")
    assert uploaded.purpose == "batch"
    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata=metadata,
    )
    assert batch.status == "in_progress"
    return batch.id


def ended(client: OpenAI, batch_id: str) -> Any:
    deadline = time.monotonic() + POLL_LIMIT_SECONDS
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if batch.status in ("completed", "expired", "cancelled", "failed"):
            return batch
        time.sleep(0.05)
    raise AssertionError("the batch did not end")


def lines(client: OpenAI, file_id: str | None) -> dict[str, Any]:
    assert file_id is not None
    content = client.files.content(file_id).read().decode()
    return {line["custom_id"]: line for line in map(json.loads, content.splitlines())}


def test_a_batch_completes_with_an_output_line_per_request(client: OpenAI) -> None:
    batch = ended(client, create(client, "Summarize: the cat sat.", "Summarize: the dog ran."))
    assert batch.status == "completed"
    assert batch.request_counts is not None
    assert batch.request_counts.completed == 2
    out = lines(client, batch.output_file_id)
    assert set(out) == {"job-0", "job-1"}
    body = out["job-0"]["response"]["body"]
    assert out["job-0"]["response"]["status_code"] == 200
    assert body["choices"][0]["message"]["content"]
    assert body["usage"]["prompt_tokens"] > 0


def test_an_expired_line_is_in_the_error_file_and_the_others_complete(client: OpenAI) -> None:
    batch = ended(client, create(client, "[[fault:batch_expired]] one", "two"))
    assert batch.status == "expired"
    assert set(lines(client, batch.output_file_id)) == {"job-1"}
    errors = lines(client, batch.error_file_id)
    assert errors["job-0"]["error"]["code"] == "batch_expired"


def test_a_refused_line_is_in_the_error_file_with_its_answer(client: OpenAI) -> None:
    batch = ended(client, create(client, "[[fault:content_policy]] no"))
    assert batch.status == "completed"
    assert batch.output_file_id is None
    error = lines(client, batch.error_file_id)["job-0"]["response"]
    assert error["status_code"] == 400
    assert error["body"]["error"]["code"] == "content_policy_violation"


def test_a_cancelled_batch_runs_nothing() -> None:
    with ModelServer(batch_seconds=60) as server:
        slow = OpenAI(api_key="local", base_url=server.url, max_retries=0)
        batch_id = create(slow, "never run")
        assert slow.batches.cancel(batch_id).status == "cancelled"
        batch = slow.batches.retrieve(batch_id)
        assert batch.status == "cancelled"
        assert batch.output_file_id is None


def test_an_unknown_batch_is_404(client: OpenAI) -> None:
    with pytest.raises(NotFoundError):
        client.batches.retrieve("batch_missing")


def test_the_list_pages_newest_first_with_each_batch_metadata_and_runs_nothing() -> None:
    with ModelServer(batch_seconds=0) as server:
        client = OpenAI(api_key="local", base_url=server.url, max_retries=0)
        created = [create(client, f"text {n}", metadata={"outlast_intent": f"i{n}"}) for n in range(5)]

        first = client.batches.list(limit=2)
        every = list(client.batches.list(limit=2))  # the SDK follows `after` while `has_more`

        assert [batch.id for batch in first.data] == created[::-1][:2]
        assert first.has_more
        assert [batch.id for batch in every] == created[::-1]
        assert [(batch.metadata or {}).get("outlast_intent") for batch in every] == [
            f"i{n}" for n in reversed(range(5))
        ]
        assert {batch.status for batch in every} == {"in_progress"}  # due, yet a list runs nothing
        last = client.batches.list(limit=2, after=created[1])
        assert [batch.id for batch in last.data] == [created[0]]
        assert not last.has_more
