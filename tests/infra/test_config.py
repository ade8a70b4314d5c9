"""Stage configuration: defaults, CLI strings, and the cross-checks that guard the design's ratios."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import aws_lambda as lambda_
from pydantic import ValidationError

from infra.config import BundleMode, StageConfig
from infra.environment import worker_environment
from infra.function_factory import application_log_level

pytestmark = pytest.mark.infra


# The worker's resource names, for its environment built without a synth.
WORKER_NAMES = {
    "jobs_table": "t",
    "bucket": "b",
    "jobs_queue_url": "q",
    "dlq_url": "d",
    "isolation_queue_url": "iq",
    "isolation_queue_arn": "arn:aws:sqs:us-east-1:123456789012:iq",
    "isolation_dlq_url": "id",
    "openai_secret_arn": "s",
    "output_events_table": "e",
    "slots_table": "sl",
}


def _config(**context):
    return StageConfig.from_context(context.get)


def test_defaults_are_valid():
    config = _config()

    assert config.bundle is BundleMode.ON
    assert config.worker_max_concurrency >= 2
    assert config.jobs_queue_visibility_seconds == 6 * config.worker_timeout_seconds + 2
    assert config.dlq_max_receive_count == config.max_attempts + 3


def test_cli_strings_are_coerced():
    config = _config(
        bundle="false", workerMaxConcurrency="20", allowedModels="a, b", defaultModel="b", selfSignUp="true"
    )

    assert config.bundle is BundleMode.OFF
    assert config.worker_max_concurrency == 20
    assert config.allowed_models == ("a", "b")
    assert config.self_sign_up is True


@pytest.mark.parametrize(
    "context",
    [
        {"workerTimeoutSeconds": 100, "providerTimeoutSeconds": 90, "releaseMarginSeconds": 15},
        {"heartbeatSeconds": 60, "leaseSeconds": 60},
        {"workerTimeoutSeconds": 200, "flexTimeoutSeconds": 190, "releaseMarginSeconds": 15},
        {"allowedTiers": "standard,priority"},
        {"defaultModel": "not-allowed"},
        {"workerMaxConcurrency": 1},
        {"logRetentionDays": 31},
        {"alarmEmail": "not an email"},
        {"idempotencyTtlHours": 48, "jobRetentionDays": 1},
        {"bundle": "sometimes"},
        {"slotRetrySeconds": 0},
        # jittered up to 1.5x, 601 s could ask SQS for a delay past its 900 s
        {"slotRetrySeconds": 601},
        {"batcherTimeoutSeconds": 9},
        {"batcherTimeoutSeconds": 901},
        {"unknownKey": 1},
    ],
)
def test_inconsistent_settings_fail_the_synth(context):
    with pytest.raises(ValidationError):
        StageConfig.model_validate(context)


def test_extracts_step_budget_is_checked_on_its_own():
    # A budget the other operations' reduces fit with: extract's must fit chunkTokens too, not theirs
    config = _config(chunkTokens=3000, stepOutputTokens=1000, extractStepOutputTokens=1200)
    assert config.extract_plan.step_output_tokens == 1200
    assert config.plan.step_output_tokens == 1000

    with pytest.raises(ValidationError, match="extract reduce of 2 outputs"):
        _config(chunkTokens=3000, stepOutputTokens=1000, extractStepOutputTokens=1480)


def test_openai_base_url_is_set_only_when_configured():
    assert "OPENAI_BASE_URL" not in worker_environment(_config(), **WORKER_NAMES)
    configured = worker_environment(_config(openAiBaseUrl="http://127.0.0.1:9000/v1"), **WORKER_NAMES)
    assert configured["OPENAI_BASE_URL"] == "http://127.0.0.1:9000/v1"


def test_slot_retry_seconds_reaches_the_worker_as_the_stage_sets_it():
    assert worker_environment(_config(), **WORKER_NAMES)["SLOT_RETRY_SECONDS"] == "5"
    assert worker_environment(_config(slotRetrySeconds="2.5"), **WORKER_NAMES)["SLOT_RETRY_SECONDS"] == "2.5"
    assert worker_environment(_config(slotRetrySeconds="600"), **WORKER_NAMES)["SLOT_RETRY_SECONDS"] == "600"


def test_every_context_key_is_documented():
    documented = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()

    missing = [f.alias for f in StageConfig.model_fields.values() if f"| `{f.alias}` |" not in documented]

    assert missing == []


@pytest.mark.parametrize(
    ("log_level", "lambda_level"),
    [
        ("DEBUG", lambda_.ApplicationLogLevel.DEBUG),
        ("INFO", lambda_.ApplicationLogLevel.INFO),
        # EMF metric lines have no level: Lambda files them as INFO, so its filter stays at INFO
        ("WARNING", lambda_.ApplicationLogLevel.INFO),
        ("ERROR", lambda_.ApplicationLogLevel.INFO),
    ],
)
def test_lambdas_application_log_level_never_drops_metric_lines(log_level, lambda_level):
    assert application_log_level(_config(logLevel=log_level).log_level) is lambda_level
