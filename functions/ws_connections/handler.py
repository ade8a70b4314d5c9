"""Lambda entry point of the WebSocket `$connect` and `$disconnect` routes."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.ws_connections.dependencies import build_dependencies
from functions.ws_connections.service import handle
from functions.ws_connections.settings import ConnectionsSettings
from shared.observability import logger, metrics, tracer
from shared.realtime import RouteEvent


# log_event stays off: a $connect event's query string holds the ticket.
@logger.inject_lambda_context(correlation_id_path="requestContext.requestId", clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Record or forget one connection."""
    deps = build_dependencies(ConnectionsSettings.from_environ())
    return handle(deps, RouteEvent.from_event(event))
