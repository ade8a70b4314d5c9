"""Lambda entry point of the WebSocket `follow` and `unfollow` routes (route responses carry the answer)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.ws_follow.dependencies import build_dependencies
from functions.ws_follow.service import handle
from functions.ws_follow.settings import FollowSettings
from shared.observability import logger, metrics, tracer
from shared.realtime import RouteEvent


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId", clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Follow or unfollow one job."""
    deps = build_dependencies(FollowSettings.from_environ())
    return handle(deps, RouteEvent.from_event(event))
