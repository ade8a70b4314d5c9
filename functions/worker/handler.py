"""Lambda entry point of the worker: SQS batch -> concurrent job runs -> partial batch response.

The batch is run here, not by Powertools' batch utility: with pydantic installed, importing
`aws_lambda_powertools.utilities.batch` builds the parser's pydantic models of every event
source it supports, and its SQS record class imports every event data class, about 40 ms of
the worker's cold start (docs/architecture.md, "Cold start") for what is a gather and a list.
The contract is the utility's: every record of the batch at once, on one event loop kept for
the container; a record whose handler raised is named in `batchItemFailures` (its message is
redelivered), the others are deleted by Lambda; a failure of every record is still a partial
response, never an error of the invocation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.worker.dependencies import build_dependencies
from functions.worker.service import JobWorker, RetryLater
from functions.worker.settings import WorkerSettings
from shared.observability import logger, metrics, tracer
from shared.ports import Lane

_LOOP: list[asyncio.AbstractEventLoop] = []  # the container's event loop, once made


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Run every record of the batch at once; report the ones to redeliver."""
    records = event.get("Records")
    if not records or not isinstance(records, list):
        raise ValueError("not an SQS batch: the event has no Records")
    settings = WorkerSettings.from_environ()
    remaining = context.get_remaining_time_in_millis() / 1000
    worker = JobWorker(
        build_dependencies(settings),
        time.monotonic() + remaining - settings.release_margin_seconds,
        solo=len(records) == 1,
    )

    async def record_handler(record: Mapping[str, Any]) -> None:
        lane = Lane.ISOLATION if record["eventSourceARN"] == settings.isolation_queue_arn else Lane.SHARED
        try:
            await worker.handle(record["body"], lane)
        except RetryLater:
            raise
        except Exception:
            # The record goes back to the queue; say which job failed (a crash loop must be findable).
            logger.exception(
                "job run failed; the message will be redelivered", extra={"message_id": record["messageId"]}
            )
            raise

    failed = _run_batch(records, record_handler)
    return {"batchItemFailures": [{"itemIdentifier": record["messageId"]} for record in failed]}


def _run_batch(
    records: list[Mapping[str, Any]], handler: Callable[[Mapping[str, Any]], Awaitable[None]]
) -> list[Mapping[str, Any]]:
    """The batch on the container's loop. An invocation that does not finish (a BaseException
    escaped one record's run) takes its loop with it: the other records' tasks are cancelled, not
    left on a loop the next invocation would resume them on, with receipt handles and leases that
    are no longer theirs. Dying like this is what a crash does to them in Lambda."""
    loop = _event_loop()
    try:
        return loop.run_until_complete(_failed_records(records, handler))
    except BaseException:
        _abandon(loop)
        raise


def _abandon(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task still on the loop, let them unwind, and close it."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()


async def _failed_records(
    records: list[Mapping[str, Any]], handler: Callable[[Mapping[str, Any]], Awaitable[None]]
) -> list[Mapping[str, Any]]:
    """Run the handler on every record at once; the records whose run raised an Exception."""

    async def failed(record: Mapping[str, Any]) -> bool:
        try:
            await handler(record)
        except Exception:  # noqa: BLE001 - reported: the record is redelivered
            return True
        return False

    outcomes = await asyncio.gather(*(failed(record) for record in records))
    return [record for record, outcome in zip(records, outcomes, strict=True) if outcome]


def _event_loop() -> asyncio.AbstractEventLoop:
    """The container's event loop: made on the first invocation, reused while it is open."""
    if not _LOOP or _LOOP[0].is_closed():
        _LOOP[:] = [asyncio.new_event_loop()]
    return _LOOP[0]
