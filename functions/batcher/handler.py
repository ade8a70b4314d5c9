"""Lambda entry point of the batcher: a batch of calls from its queue (after its batching window)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from functions.batcher.dependencies import build_dependencies
from functions.batcher.service import batch_calls
from functions.batcher.settings import BatcherSettings
from shared.batches import BatchCall
from shared.observability import logger, metrics, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """All of the messages' calls into batches; an error fails the invocation, and SQS delivers the
    messages again (calls already in a batch are dropped then: functions.batcher.service)."""
    calls: list[BatchCall] = []
    for record in event.get("Records", []):
        try:
            calls.append(BatchCall.model_validate_json(record["body"]))
        except ValidationError:
            logger.warning("unreadable batch call dropped", extra={"message_id": record.get("messageId")})
    report = batch_calls(build_dependencies(BatcherSettings.from_environ()), calls)
    metrics.add_metric(name="BatchesCreated", unit="Count", value=len(report.batches))
    logger.info("calls batched", extra={"batches": report.batches, "stale": report.stale})
    return {"batches": report.batches, "stale": report.stale}
