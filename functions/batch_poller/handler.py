"""Lambda entry point of the batch poller, run by an EventBridge schedule."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.batch_poller.dependencies import build_dependencies
from functions.batch_poller.service import poll
from functions.batch_poller.settings import BatchPollerSettings
from shared.observability import logger, metrics, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One look at every open batch; the summary is returned for whoever invoked it by hand."""
    report = poll(build_dependencies(BatchPollerSettings.from_environ()))
    metrics.add_metric(name="BatchesOpen", unit="Count", value=report.open)
    metrics.add_metric(name="BatchesOverdue", unit="Count", value=report.overdue)
    metrics.add_metric(name="BatchesFailed", unit="Count", value=report.failed)
    if report.orphaned:
        metrics.add_metric(name="BatchesOrphaned", unit="Count", value=report.orphaned)
    if report.errors:
        metrics.add_metric(name="BatchPollErrors", unit="Count", value=report.errors)
    return {
        "open": report.open,
        "ended": report.ended,
        "finished": report.finished,
        "handedBack": report.handed_back,
    }
