"""Lambda entry point of the WebSocket `$connect` ticket authorizer."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.ws_authorizer.dependencies import build_dependencies
from functions.ws_authorizer.service import ConnectRequest, authorize
from functions.ws_authorizer.settings import AuthorizerSettings
from shared.observability import logger, metrics, tracer


# log_event stays off: the event's query string holds the ticket.
@logger.inject_lambda_context(correlation_id_path="requestContext.requestId", clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Decide one connect."""
    deps = build_dependencies(AuthorizerSettings.from_environ())
    return authorize(deps, ConnectRequest.from_event(event))
