"""Lambda entry point of the WebSocket `$default` route (its route response carries the answer).

No settings and no clients: it answers from the message alone, and its role may do nothing but
write its logs.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.ws_messages.dependencies import build_dependencies
from functions.ws_messages.service import handle
from shared.observability import logger, tracer


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId", clear_state=True)
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Answer one message."""
    return handle(build_dependencies(), event.get("body"))
