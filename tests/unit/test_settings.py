"""Function settings: validated once from the environment, failing fast on what breaks the contract."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from functions.status.settings import StatusSettings
from functions.submit.settings import SubmitSettings
from shared import resources as r

STORAGE = {
    r.ENV_JOBS_TABLE: "jobs",
    r.ENV_IDEMPOTENCY_TABLE: "idempotency",
    r.ENV_PAYLOAD_BUCKET: "payloads",
    r.ENV_BUDGETS_TABLE: "budgets",
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
