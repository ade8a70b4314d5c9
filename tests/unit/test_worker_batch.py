"""The worker's batch: every record at once, the failed ones named, one event loop per container."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from functions.worker import handler


def _records(*ids: str) -> list[Mapping[str, Any]]:
    return [{"messageId": i, "body": i} for i in ids]


def _failed(ids: tuple[str, ...], run: Any) -> list[str]:
    """The ids of the records the batch reports as failed."""
    failed = handler._event_loop().run_until_complete(handler._failed_records(_records(*ids), run))
    return [record["messageId"] for record in failed]


class _Context:
    function_name = "outlast-worker"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:outlast-worker"
    aws_request_id = "request-1"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 60_000


def test_the_records_whose_handler_raised_are_the_failures():
    # Given a batch where two of four records fail
    async def run(record: Mapping[str, Any]) -> None:
        if record["messageId"] in {"b", "d"}:
            raise RuntimeError(record["messageId"])

    # When it runs
    failed = handler._event_loop().run_until_complete(
        handler._failed_records(_records("a", "b", "c", "d"), run)
    )

    # Then exactly those are reported, in the batch's order
    assert [r["messageId"] for r in failed] == ["b", "d"]


def test_every_record_failing_is_still_a_list_of_failures_not_an_error():
    async def run(record: Mapping[str, Any]) -> None:
        raise ValueError("no")

    assert _failed(("a", "b"), run) == ["a", "b"]


def test_the_records_run_at_once():
    # Given handlers that each wait until all of them have started
    started: list[str] = []
    everyone = asyncio.Event()

    async def run(record: Mapping[str, Any]) -> None:
        started.append(record["messageId"])
        if len(started) == 3:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), timeout=5)

    # When the batch runs, Then none waits in vain (run one by one, the first would time out)
    assert _failed(("a", "b", "c"), run) == []


def test_a_base_exception_is_not_a_record_failure():
    async def run(record: Mapping[str, Any]) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _failed(("a",), run)


def test_an_invocation_that_does_not_finish_leaves_no_task_to_a_later_one():
    # Given a batch where one record's run dies while another's is still waiting
    resumed: list[str] = []
    waiting = asyncio.Event()

    async def run(record: Mapping[str, Any]) -> None:
        if record["messageId"] == "dies":
            await waiting.wait()
            raise KeyboardInterrupt
        waiting.set()
        await asyncio.sleep(3600)
        resumed.append(record["messageId"])

    loop = handler._event_loop()
    # When the invocation ends with the BaseException
    with pytest.raises(KeyboardInterrupt):
        handler._run_batch(_records("waits", "dies"), run)

    # Then the waiting record's task was cancelled with its loop, which the next invocation remakes
    assert loop.is_closed()
    assert resumed == []
    assert handler._run_batch(_records("next"), _ok) == []
    assert handler._event_loop() is not loop


async def _ok(record: Mapping[str, Any]) -> None:
    return None


def test_the_event_loop_is_kept_for_the_container_and_remade_once_closed():
    loop = handler._event_loop()
    assert handler._event_loop() is loop
    loop.close()
    again = handler._event_loop()
    assert again is not loop
    assert not again.is_closed()


def test_an_event_without_records_is_refused():
    with pytest.raises(ValueError, match="Records"):
        handler.lambda_handler({}, _Context())
