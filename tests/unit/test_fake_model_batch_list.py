"""The fake model's Batch API list, as a pure desk (outlast.local.fake_model.batches): newest first,
paged by `limit` and `after`, with each batch's metadata; it runs no batch; bad pages are refused."""

from __future__ import annotations

import json

from outlast.local.fake_model.batches import BatchDesk
from outlast.local.fake_model.calls import CallOutcome
from outlast.local.fake_model.replies import Reply

LINE = {"custom_id": "j:s:1", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": []}}


def never_called(body: bytes) -> tuple[Reply, CallOutcome]:
    raise AssertionError("a list must run no batch")


def desk_with(count: int) -> tuple[BatchDesk, list[str]]:
    desk = BatchDesk(never_called, batch_seconds=0)
    uploaded = desk.upload("in.jsonl", "batch", (json.dumps(LINE) + "\n").encode(), now=0).body
    created = [
        desk.create(
            {
                "input_file_id": uploaded["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "metadata": {"outlast_intent": f"i{n}"},
            },
            now=float(n),
        ).body["id"]
        for n in range(count)
    ]
    return desk, created


def test_pages_run_newest_first_and_carry_metadata() -> None:
    desk, created = desk_with(3)

    first = desk.list_batches(limit=2).body
    rest = desk.list_batches(limit=2, after=first["last_id"]).body

    assert [batch["id"] for batch in first["data"]] == [created[2], created[1]]
    assert first["has_more"]
    assert [batch["id"] for batch in rest["data"]] == [created[0]]
    assert not rest["has_more"]
    assert first["data"][0]["metadata"] == {"outlast_intent": "i2"}
    assert {batch["status"] for batch in first["data"] + rest["data"]} == {"in_progress"}


def test_a_bad_limit_is_400_and_an_unknown_cursor_404() -> None:
    desk, _ = desk_with(1)

    assert desk.list_batches(limit=0).status == 400
    assert desk.list_batches(limit=101).status == 400
    assert desk.list_batches(after="batch_missing").status == 404
    assert desk.list_batches().body["data"] != []
