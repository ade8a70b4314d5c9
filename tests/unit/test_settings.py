"""Function settings: validated once from the environment, failing fast on what breaks the contract."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pydantic import ValidationError

from functions.relay import handler as relay_handler
from functions.relay.settings import RelaySettings
from functions.status.settings import StatusSettings
from functions.submit.settings import SubmitSettings
from shared import resources as r
from shared.env import SettingsError
from tests.support.lambda_context import FakeLambdaContext

STORAGE = {
    r.ENV_JOBS_TABLE: "jobs",
    r.ENV_IDEMPOTENCY_TABLE: "idempotency",
    r.ENV_PAYLOAD_BUCKET: "payloads",
    r.ENV_BUDGETS_TABLE: "budgets",
    r.ENV_DOCUMENTS_TABLE: "documents",
    r.ENV_DOCUMENTS_BUCKET: "documents",
}


def test_the_defaults_are_the_designs() -> None:
    settings = SubmitSettings.from_environ(STORAGE)

    assert settings.submits_per_minute == 60
    assert settings.max_attempts == 3
    assert settings.idempotency_ttl_hours == 24
    assert settings.job_retention_days == 30
    assert settings.allowed_models == ("gpt-4o-mini",)
    assert settings.default_monthly_tokens == 0  # no stage budget: no budget writes


def test_a_negative_stage_budget_fails_at_once() -> None:
    with pytest.raises(ValidationError):
        SubmitSettings.from_environ({**STORAGE, "DEFAULT_MONTHLY_TOKENS": "-1"})


def test_the_allowlist_is_a_comma_separated_variable() -> None:
    settings = SubmitSettings.from_environ({**STORAGE, "ALLOWED_MODELS": " gpt-4o-mini , gpt-4o,,"})

    assert settings.allowed_models == ("gpt-4o-mini", "gpt-4o")


@pytest.mark.parametrize("missing", sorted(STORAGE))
def test_a_missing_resource_name_fails_at_once(missing: str) -> None:
    with pytest.raises(ValidationError):
        SubmitSettings.from_environ({k: v for k, v in STORAGE.items() if k != missing})


def test_the_status_function_needs_the_cursor_secret() -> None:
    with pytest.raises(ValidationError):
        StatusSettings.from_environ(STORAGE)


@pytest.mark.parametrize(("name", "value"), [("SUBMITS_PER_MINUTE", "0"), ("MAX_ATTEMPTS", "11")])
def test_values_out_of_range_fail_at_once(name: str, value: str) -> None:
    with pytest.raises(ValidationError):
        SubmitSettings.from_environ({**STORAGE, name: value})


def test_an_idempotency_claim_may_not_outlive_its_job() -> None:
    # DESIGN.md: idempotency items 24 h, "never longer than jobs". A claim that outlives its job
    # replays a job that is gone, or (once TTL deleted the job item) writes it again, which
    # restarts work the contract says has expired.
    with pytest.raises(ValidationError):
        SubmitSettings.from_environ({**STORAGE, "IDEMPOTENCY_TTL_HOURS": "48", "JOB_RETENTION_DAYS": "1"})


def test_the_relay_reads_its_queue_without_pydantic() -> None:
    settings = RelaySettings.from_environ({r.ENV_JOBS_QUEUE_URL: "https://sqs.example/jobs", "OTHER": "x"})

    assert settings == RelaySettings(jobs_queue_url="https://sqs.example/jobs")


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        pytest.param({}, f"{r.ENV_JOBS_QUEUE_URL} is missing", id="missing"),
        pytest.param({r.ENV_JOBS_QUEUE_URL: ""}, f"{r.ENV_JOBS_QUEUE_URL} is empty", id="empty"),
        pytest.param({r.ENV_JOBS_QUEUE_URL: "  "}, f"{r.ENV_JOBS_QUEUE_URL} is empty", id="blank"),
    ],
)
def test_a_relay_without_its_queue_fails_at_once_and_says_why(environ: dict[str, str], problem: str) -> None:
    with pytest.raises(SettingsError) as failure:
        RelaySettings.from_environ(environ)

    assert failure.value.problems == (problem,)
    assert str(failure.value) == f"RelaySettings: {problem}"


def test_a_bad_relay_environment_fails_its_first_invocation_before_any_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the relay's Lambda environment without its queue, and a batch with a job INSERT
    monkeypatch.delenv(r.ENV_JOBS_QUEUE_URL, raising=False)
    batch = {"Records": [{"eventName": "INSERT", "dynamodb": {"SequenceNumber": "1"}}]}

    # When Lambda invokes the handler (the first thing it does is read its settings)
    # Then the invocation fails with the variable's name, before any client or record is touched
    with pytest.raises(SettingsError, match=f"RelaySettings: {r.ENV_JOBS_QUEUE_URL} is missing"):
        relay_handler.lambda_handler(batch, FakeLambdaContext())


def test_the_relay_imports_no_pydantic() -> None:
    # The point of parsing by hand: a fresh interpreter that imports the relay's handler (and so
    # everything its cold start imports) has not imported pydantic.
    code = "import sys, functions.relay.handler; print('pydantic' in sys.modules)"
    completed = subprocess.run(  # noqa: S603 - our own interpreter and a fixed script
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "POWERTOOLS_TRACE_DISABLED": "true"},
    )

    assert completed.stdout.strip() == "False"
