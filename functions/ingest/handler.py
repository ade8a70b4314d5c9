"""Lambda entry point of the ingest: ingest queue batch (S3 notifications) -> partial batch response.

Records are handled one after another: an extraction takes the function's CPU, and the queue's
batches are small. A record whose handling raised (a storage error, too little time left to
extract) is named in `batchItemFailures` and comes back; poison never raises, it is parked.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.ingest.dependencies import build_dependencies
from functions.ingest.service import IngestService
from functions.ingest.settings import IngestSettings
from shared.observability import logger, metrics, tracer

# Kept back from the invocation's remaining time for the writes after an extraction.
_FINISH_MARGIN_SECONDS = 5.0


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Ingest every record of the batch; report the ones to redeliver."""
    settings = IngestSettings.from_environ()
    deadline = time.monotonic() + context.get_remaining_time_in_millis() / 1000 - _FINISH_MARGIN_SECONDS
    service = IngestService(build_dependencies(settings), deadline)

    def record_handler(record: SQSRecord) -> None:
        service.handle(record.body)

    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return dict(process_partial_response(event, record_handler, processor, context))
