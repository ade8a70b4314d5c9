"""Settings: one pydantic model per function, read from the environment once, at cold start."""

import os
from collections.abc import Mapping
from typing import Annotated, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from shared import resources as r


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


CsvTuple = Annotated[tuple[str, ...], BeforeValidator(_split_csv)]


class EnvSettings(BaseModel):
    """Base of the settings models: fields are aliased to environment variable names."""

    # Built at first use: a function validates only its own settings model, never these bases,
    # so its cold start need not build theirs.
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True, defer_build=True)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Validate the settings from the environment (or a given mapping); fails fast when wrong."""
        return cls.model_validate(dict(os.environ if environ is None else environ))


class StorageSettings(EnvSettings):
    """Where jobs, idempotency claims and large payloads live."""

    jobs_table: str = Field(alias=r.ENV_JOBS_TABLE, min_length=1)
    idempotency_table: str = Field(alias=r.ENV_IDEMPOTENCY_TABLE, min_length=1)
    payload_bucket: str = Field(alias=r.ENV_PAYLOAD_BUCKET, min_length=1)


class BudgetStorageSettings(EnvSettings):
    """Where token budgets live (DESIGN.md, "Token budgets")."""

    budgets_table: str = Field(alias=r.ENV_BUDGETS_TABLE, min_length=1)


class SlotStorageSettings(EnvSettings):
    """Where tenants' running slots live (DESIGN.md, "Fairness between tenants")."""

    slots_table: str = Field(alias=r.ENV_SLOTS_TABLE, min_length=1)


class BatchProviderSettings(EnvSettings):
    """The batch tier's functions (the batcher, the poller): the open batches and the provider."""

    batches_table: str = Field(alias=r.ENV_BATCHES_TABLE, min_length=1)
    openai_secret: str = Field(alias=r.ENV_OPENAI_SECRET, min_length=1)
    openai_base_url: str | None = Field(default=None, alias="OPENAI_BASE_URL")
    secret_max_age_seconds: int = Field(default=300, alias="SECRET_MAX_AGE_SECONDS", ge=0, le=3600)
    provider_timeout_seconds: float = Field(default=120, alias="PROVIDER_TIMEOUT_SECONDS", gt=0, le=900)


class BudgetPolicySettings(BudgetStorageSettings):
    """The stage's monthly token limit for tenants without one of their own (0: no limit)."""

    default_monthly_tokens: int = Field(default=0, alias="DEFAULT_MONTHLY_TOKENS", ge=0)


class JobPolicySettings(EnvSettings):
    """The knobs of the job lifecycle shared by the API and the worker."""

    max_attempts: int = Field(default=3, alias="MAX_ATTEMPTS", ge=1, le=10)
    job_retention_days: int = Field(default=30, alias="JOB_RETENTION_DAYS", ge=1, le=365)
    idempotency_ttl_hours: int = Field(default=24, alias="IDEMPOTENCY_TTL_HOURS", ge=1, le=24 * 7)
    # A Pending job not claimed this long after its dispatch is re-sent by the sweeper.
    dispatch_grace_seconds: int = Field(default=900, alias="DISPATCH_GRACE_SECONDS", ge=1, le=86_400)
    # How soon the sweeper looks at a watched job again (its index entry's sweepAt): a crashed
    # job is back in the queue within this long of its lease expiring. The index is written at
    # submit and at the terminal write, not at claims; a job still running or backing off at its
    # look costs one deferral write.
    sweep_look_seconds: int = Field(default=300, alias="SWEEP_LOOK_SECONDS", ge=1, le=3600)
    poll_after_seconds: int = Field(default=2, alias="POLL_AFTER_SECONDS", ge=1, le=60)
    default_model: str = Field(default="gpt-4o-mini", alias="DEFAULT_MODEL", min_length=1)
    allowed_models: CsvTuple = Field(default=("gpt-4o-mini",), alias="ALLOWED_MODELS")
    # Inputs are deleted this long after their job ends (shared.retention).
    input_retention_hours: int = Field(default=24, alias="INPUT_RETENTION_HOURS", ge=1, le=24 * 30)
    # Leases that may expire on a job running alone before it fails with worker_crashed.
    max_crashes: int = Field(default=2, alias="MAX_CRASHES", ge=1, le=10)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        # A claim that outlived its job could replay an expired job or re-create a deleted one.
        if self.idempotency_ttl_hours > self.job_retention_days * 24:
            raise ValueError("IDEMPOTENCY_TTL_HOURS must not exceed JOB_RETENTION_DAYS")
        if self.default_model not in self.allowed_models:
            raise ValueError("DEFAULT_MODEL must be one of ALLOWED_MODELS")
        return self
