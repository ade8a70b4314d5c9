"""Lambda entry point of the sweeper, run by an EventBridge schedule."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.sweeper.dependencies import build_dependencies
from functions.sweeper.service import sweep
from functions.sweeper.settings import SweeperSettings
from shared.observability import logger, metrics, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One sweep; the summary is returned for whoever invoked it by hand."""
    report = sweep(build_dependencies(SweeperSettings.from_environ()))
    return {"examined": report.examined, "recoveries": report.recoveries, "jobIds": report.job_ids}
