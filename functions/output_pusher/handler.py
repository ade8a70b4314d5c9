"""Lambda entry point of the output pusher: output events stream -> the followers' WebSocket connections."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.output_pusher.dependencies import build_dependencies
from functions.output_pusher.service import BatchPusher
from functions.output_pusher.settings import OutputPusherSettings
from shared.observability import logger, metrics, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Push the batch; report the records whose followers could not be read."""
    deps = build_dependencies(OutputPusherSettings.from_environ())
    pusher = BatchPusher(deps, list(event.get("Records", [])))

    def push(record: DynamoDBRecord) -> None:
        pusher.push(record.raw_event)

    processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
    response = process_partial_response(
        event=event, record_handler=push, processor=processor, context=context
    )
    return dict(response)
