"""Lambda entry point of the relay: DynamoDB stream (INSERTs of job items) -> SQS."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.relay.dependencies import build_dependencies
from functions.relay.service import relay_records
from functions.relay.settings import RelaySettings
from shared.observability import current_trace_id, logger, metrics, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Relay the batch and report partial failures by sequence number."""
    deps = build_dependencies(RelaySettings.from_environ())
    return relay_records(list(event.get("Records", [])), deps.queue, current_trace_id())
