"""Lambda entry point of the notifier: jobs table stream (job writes) -> the owners' WebSocket connections."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.notifier.dependencies import build_dependencies
from functions.notifier.service import BatchNotifier
from functions.notifier.settings import NotifierSettings
from functions.notifier.settlement import settle_record, unpin_record
from shared.observability import logger, metrics, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Settle and push the batch; report the records whose settlement or owner's connections failed."""
    deps = build_dependencies(NotifierSettings.from_environ())
    notifier = BatchNotifier(deps, list(event.get("Records", [])))

    def push(record: DynamoDBRecord) -> None:
        # Settle first: if it fails, the record fails, and its retry pushes again (harmlessly).
        settle_record(deps.budgets, record.raw_event)
        unpin_record(deps.documents, record.raw_event)
        notifier.push(record.raw_event)

    processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
    response = process_partial_response(
        event=event, record_handler=push, processor=processor, context=context
    )
    return dict(response)
