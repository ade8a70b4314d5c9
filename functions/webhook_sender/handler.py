"""Lambda entry point of the webhook sender: webhooks queue batch -> one attempt per message, at once.

Each message's attempt runs on its own thread (the POSTs are I/O bound; Lambda bills
wall-clock); a message to retry is reported as a batch item failure after the sender set its
visibility to the wait, so it comes back exactly then. Logs and metrics name the delivery,
the endpoint and the answer, never a body or a secret.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.webhook_sender.dependencies import build_dependencies
from functions.webhook_sender.settings import WebhookSenderSettings
from shared import resources as r
from shared.observability import logger, metrics, tracer
from shared.webhooks.endpoints import DeliveryState
from shared.webhooks.sender import RetryLater, SendReport

_OUTCOME_METRICS = {
    DeliveryState.DELIVERED: "WebhooksDelivered",
    DeliveryState.GONE: "WebhookEndpointsDisabled",
    DeliveryState.DEAD: "WebhooksDeadLettered",
}


def observe(report: SendReport) -> None:
    """One log line and the metrics of one message's outcome."""
    message, attempt = report.message, report.attempt
    keys: dict[str, Any] = {
        "webhook_id": message.webhook_id if message else None,
        "endpoint_id": message.endpoint_id if message else None,
        "outcome": report.outcome.value if report.outcome else None,
        "dropped": report.dropped.value if report.dropped else None,
    }
    if attempt is not None:
        keys |= {
            "attempt": attempt.number,
            "status": attempt.status,
            "latency_ms": attempt.latency_ms,
            "failure": attempt.failure,
        }
        metrics.add_metric(name=r.WEBHOOK_ATTEMPTS_METRIC, unit="Count", value=1)
        if attempt.outcome is not DeliveryState.DELIVERED:
            metrics.add_metric(name=r.WEBHOOK_FAILURES_METRIC, unit="Count", value=1)
    if report.outcome in _OUTCOME_METRICS:
        metrics.add_metric(name=_OUTCOME_METRICS[report.outcome], unit="Count", value=1)
    if report.dropped is not None:
        metrics.add_metric(name="WebhooksDropped", unit="Count", value=1)
    if report.record_failed:
        metrics.add_metric(name="WebhookRecordFailures", unit="Count", value=1)
        logger.warning("webhook attempt not recorded", extra=keys)
    if report.outcome in {DeliveryState.GONE, DeliveryState.DEAD}:
        logger.warning("webhook delivery ended", extra=keys)
    else:
        logger.info("webhook message handled", extra=keys)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Attempt every message of the batch at once; report the ones to retry."""
    batch = build_dependencies(WebhookSenderSettings.from_environ()).sender.batch()

    async def record_handler(record: SQSRecord) -> None:
        receive_count = int(record.attributes.approximate_receive_count or 1)
        report = await asyncio.to_thread(batch.send, record.body, record.receipt_handle, receive_count)
        observe(report)
        if report.retry:
            raise RetryLater(record.message_id)

    processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return dict(async_process_partial_response(event, record_handler, processor, context))
