"""Lambda entry point of the documents function."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.documents.dependencies import build_dependencies
from functions.documents.routes import app
from functions.documents.settings import DocumentsApiSettings
from shared.http import serve
from shared.observability import logger, metrics, tracer


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Wire the dependencies (once per container) and resolve the request."""
    app.append_context(  # type: ignore[no-untyped-call] # Powertools leaves it untyped
        deps=build_dependencies(DocumentsApiSettings.from_environ())
    )
    return serve(app, event, context)
