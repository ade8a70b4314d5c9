"""Every operation goes Pending -> Running -> Succeeded through the real handlers and the real SDK."""

from __future__ import annotations

import pytest

from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.integration

BODIES = {
    "summarize": {"operation": "summarize", "input": {"text": "Outlast keeps work alive. It retries."}},
    "analyze": {"operation": "analyze", "input": {"text": "A calm report about quarterly numbers."}},
    "classify": {
        "operation": "classify",
        "input": {"text": "The invoice is overdue and payment failed."},
        "options": {"labels": ["billing", "shipping", "other"]},
    },
}


@pytest.mark.parametrize("operation", sorted(BODIES))
def test_each_operation_succeeds_with_result_and_usage(pipeline: Pipeline, operation: str) -> None:
    # Given an accepted job
    accepted = pipeline.submit(BODIES[operation], key=f"happy-{operation}")
    assert accepted["statusCode"] == 202
    job_id = accepted["body"]["jobId"]

    # When the asynchronous half runs
    [final] = pipeline.terminal(job_id)

    # Then it succeeded after one model call, with usage and a result
    assert final["status"] == "Succeeded"
    assert final["attempts"] == 1
    assert final["usage"]["inputTokens"] > 0
    assert final["resultUrl"] == f"/v1/jobs/{job_id}/result"
    result = pipeline.result(job_id)
    assert result["statusCode"] == 200
    assert result["body"]["output"]
    assert result["body"]["usage"] == final["usage"]
    if operation == "classify":
        assert result["body"]["output"] in {"billing", "shipping", "other"}
    assert len(pipeline.model_calls()) == 1
