"""Lambda entry point of the worker: SQS batch -> concurrent job runs -> partial batch response."""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.worker.dependencies import build_dependencies
from functions.worker.service import JobWorker, RetryLater
from functions.worker.settings import WorkerSettings
from shared.observability import logger, metrics, tracer
from shared.ports import Lane


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Run every record of the batch at once; report the ones to redeliver."""
    settings = WorkerSettings.from_environ()
    remaining = context.get_remaining_time_in_millis() / 1000
    worker = JobWorker(
        build_dependencies(settings),
        time.monotonic() + remaining - settings.release_margin_seconds,
        solo=len(event.get("Records", [])) == 1,
    )

    async def record_handler(record: SQSRecord) -> None:
        lane = Lane.ISOLATION if record.event_source_arn == settings.isolation_queue_arn else Lane.SHARED
        try:
            await worker.handle(record.body, record.receipt_handle, lane)
        except RetryLater:
            raise
        except Exception:
            # The record goes back to the queue; say which job failed (a crash loop must be findable).
            logger.exception(
                "job run failed; the message will be redelivered", extra={"message_id": record.message_id}
            )
            raise

    processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return dict(async_process_partial_response(event, record_handler, processor, context))
