"""Stage configuration: CDK context keys, their defaults, validated once before any construct exists.

Every key is documented in docs/configuration.md. Set a key for one command with
`cdk deploy -c workerMaxConcurrency=20` (values arrive as strings and are coerced), or for a
stage in cdk.json / cdk.context.json (JSON values). Anything not set takes the default below.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from infra.names import DEFAULT_METRICS_NAMESPACE
from shared.contract import Operation
from shared.plan_parameters import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_EXTRACT_STEP_OUTPUT_TOKENS,
    DEFAULT_STEP_OUTPUT_TOKENS,
    PLAN_VERSION,
    PlanParameters,
)
from shared.planner import check_plan_parameters
from shared.resources import MAX_DELAY_SECONDS
from shared.slots import SLOT_RETRY_JITTER

# Fixed by the design rather than per stage (DESIGN.md, "Cost discipline" and "Delivery and execution").
WORKER_BATCH_SIZE = 10
WORKER_BATCH_WINDOW_SECONDS = 2
# SQS's advice for Lambda consumers, plus the batching window (a message waits that long before a run).
VISIBILITY_TIMEOUT_FACTOR = 6
# The redrive policy catches crash loops only: the worker itself fails jobs at maxAttempts.
DLQ_EXTRA_RECEIVES = 3
DLQ_RETENTION_DAYS = 14
RELAY_BATCH_SIZE = 100
RELAY_RETRY_ATTEMPTS = 3
# Records older than this go to the relay's failure queue; the sweeper re-sends their jobs anyway.
RELAY_MAX_RECORD_AGE_SECONDS = 3600
# The notifier (live updates): a push that is late is worth little, so records give up sooner than
# the relay's and go (as metadata) to its failure queue; clients that missed one re-read the job.
NOTIFIER_BATCH_SIZE = 100
NOTIFIER_RETRY_ATTEMPTS = 2
NOTIFIER_MAX_RECORD_AGE_SECONDS = 300
# The output pusher (streaming output): like the notifier's, a late event is worth little to a
# follower (it catches up from GET /v1/jobs/{id}/output), so records give up soon.
OUTPUT_PUSHER_BATCH_SIZE = 100
OUTPUT_PUSHER_RETRY_ATTEMPTS = 2
OUTPUT_PUSHER_MAX_RECORD_AGE_SECONDS = 300
SQS_MAX_VISIBILITY_SECONDS = 12 * 3600
# DynamoDB's default per-table throughput quota (read or write units a second) and the range of
# target utilisations DynamoDB auto scaling accepts.
DYNAMODB_MAX_CAPACITY = 40_000
AUTO_SCALING_TARGET_RANGE = (20, 90)
LAMBDA_MAX_TIMEOUT_SECONDS = 900

# The retention periods CloudWatch Logs accepts.
LOG_RETENTION_DAYS = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}
)

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_ORIGIN = re.compile(r"^https://[a-z0-9.-]+(:\d{1,5})?$")
# Other origins may be plain http (a developer's app on localhost); never a wildcard.
_ANY_ORIGIN = re.compile(r"^https?://[a-z0-9.-]+(:\d{1,5})?$")


class BundleMode(StrEnum):
    """How the dependency layers are produced at synth time."""

    # Build missing layers with pip (needs PyPI the first time), reuse cached ones: what a deploy needs.
    ON = "true"
    # Placeholder layers, no pip, no network: tests and local mode (the host's venv stands in).
    OFF = "false"
    # Cached layers when present, placeholders otherwise: `make synth` works offline.
    AUTO = "auto"


def _csv(value: object) -> object:
    """Lists come as JSON lists from cdk.json and as comma-separated strings from `-c key=a,b`."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


class CapacityMode(StrEnum):
    """How the DynamoDB tables are billed (DESIGN.md, "Cost discipline")."""

    # Per request: no capacity to plan, nothing paid while idle; what local mode always emulates.
    ON_DEMAND = "onDemand"
    # Capacity units per hour, auto scaled on every table and index to the target utilisation.
    PROVISIONED = "provisioned"


def _capacity_mode(value: object) -> object:
    """`onDemand`, `on-demand`, `PAY_PER_REQUEST`, `provisioned`, ...: case and separators ignored."""
    if isinstance(value, str):
        folded = value.strip().lower().replace("-", "").replace("_", "")
        return {"ondemand": CapacityMode.ON_DEMAND, "payperrequest": CapacityMode.ON_DEMAND}.get(
            folded, CapacityMode.PROVISIONED if folded == "provisioned" else value
        )
    return value


def _bundle(value: object) -> object:
    if isinstance(value, bool):
        return BundleMode.ON if value else BundleMode.OFF
    if isinstance(value, str):
        return value.strip().lower()
    return value


CsvTuple = Annotated[tuple[str, ...], BeforeValidator(_csv)]


class StageConfig(BaseModel):
    """One stage's settings; field aliases are the CDK context keys."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    # Naming and packaging.
    stack_name: str = Field(default="outlast", alias="stackName", pattern=r"^[A-Za-z][A-Za-z0-9-]{0,127}$")
    bundle: Annotated[BundleMode, BeforeValidator(_bundle)] = Field(default=BundleMode.ON, alias="bundle")
    retain_data: bool = Field(default=True, alias="retainData")

    # Observability.
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO", alias="logLevel")
    # Active X-Ray tracing on the API functions (submit, status); the others always trace.
    api_tracing: bool = Field(default=False, alias="apiTracing")
    log_retention_days: int = Field(default=30, alias="logRetentionDays")
    metrics_namespace: str = Field(default=DEFAULT_METRICS_NAMESPACE, alias="metricsNamespace", min_length=1)
    alarm_email: str | None = Field(default=None, alias="alarmEmail")
    oldest_message_alarm_seconds: int = Field(default=1800, alias="oldestMessageAlarmSeconds", ge=60)
    iterator_age_alarm_seconds: int = Field(default=300, alias="iteratorAgeAlarmSeconds", ge=60)
    sweeper_recovery_alarm_threshold: int = Field(default=5, alias="sweeperRecoveryAlarmThreshold", ge=1)

    # Identity and the HTTP API.
    self_sign_up: bool = Field(default=False, alias="selfSignUp")
    threat_protection: bool = Field(default=False, alias="threatProtection")
    # Origins the API's CORS allows besides the console's (`consoleOrigin`); neither set: none.
    cors_allowed_origins: CsvTuple = Field(default=(), alias="corsAllowedOrigins")
    # The web console (DESIGN.md, "Web console"): its origin as browsers see it (the ConsoleUrl output
    # after the first deploy, or a domain in front of it), and the user pool domain's prefix.
    console_origin: str | None = Field(default=None, alias="consoleOrigin")
    auth_domain_prefix: str | None = Field(
        default=None, alias="authDomainPrefix", pattern=r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
    )
    api_throttle_rate_limit: float = Field(default=100, alias="apiThrottleRateLimit", gt=0)
    api_throttle_burst_limit: int = Field(default=200, alias="apiThrottleBurstLimit", ge=1)
    api_memory_mb: int = Field(default=512, alias="apiMemoryMb", ge=128, le=10_240)

    # Job policy (the functions' JobPolicySettings).
    job_retention_days: int = Field(default=30, alias="jobRetentionDays", ge=1, le=365)
    idempotency_ttl_hours: int = Field(default=24, alias="idempotencyTtlHours", ge=1, le=24 * 7)
    input_retention_hours: int = Field(default=24, alias="inputRetentionHours", ge=1, le=24 * 30)
    max_attempts: int = Field(default=3, alias="maxAttempts", ge=1, le=10)
    max_crashes: int = Field(default=2, alias="maxCrashes", ge=1, le=10)
    submits_per_minute: int = Field(default=60, alias="submitsPerMinute", ge=1, le=100_000)
    poll_after_seconds: int = Field(default=2, alias="pollAfterSeconds", ge=1, le=60)
    default_model: str = Field(default="gpt-4o-mini", alias="defaultModel", min_length=1)
    allowed_models: CsvTuple = Field(default=("gpt-4o-mini",), alias="allowedModels", min_length=1)
    # Tiers jobs may ask for (DESIGN.md, "Cost tiers"), each only for the models the price table
    # (docs/model-prices.json) prices at it.
    allowed_tiers: CsvTuple = Field(default=("standard", "flex", "batch"), alias="allowedTiers", min_length=1)
    # A flex call may queue at the provider: its own, longer timeout, which synth fits in the worker's.
    flex_timeout_seconds: float = Field(default=240, alias="flexTimeoutSeconds", gt=0, le=900)
    # A flex job still refused ("resource unavailable") this long after submit runs at standard.
    flex_fallback_seconds: int = Field(default=3600, alias="flexFallbackSeconds", ge=0, le=7 * 86_400)
    # The batch tier (DESIGN.md, "Cost tiers"): how long the batcher's queue gathers calls into one
    # invocation (so into one provider batch per model), and how often the poller looks at open batches.
    batch_window_seconds: int = Field(default=60, alias="batchWindowSeconds", ge=1, le=300)
    # The batcher's timeout (one upload and one create per model); its queue's visibility timeout is
    # six times it plus the batching window: the calls of a batcher that died come back that late.
    batcher_timeout_seconds: int = Field(default=300, alias="batcherTimeoutSeconds", ge=10, le=900)
    batch_poll_schedule: str = Field(default="rate(1 minute)", alias="batchPollSchedule", min_length=1)
    # The poller resolves a batcher's intent left this long after the batcher's timeout (a batcher
    # that died between its create and its record): the provider's list catching up with a create,
    # and the clocks of Lambda and the provider apart.
    batch_intent_margin_seconds: int = Field(default=60, alias="batchIntentMarginSeconds", ge=0, le=3600)
    openai_base_url: str | None = Field(default=None, alias="openAiBaseUrl")
    # Token budgets (DESIGN.md, "Token budgets"): the monthly limit of tenants without their own
    # (`outlast ops budgets set`); 0: no limit, and no budget writes for them.
    default_monthly_tokens: int = Field(default=0, alias="defaultMonthlyTokens", ge=0)
    # Fairness (DESIGN.md, "Fairness between tenants"): the running cap of tenants without their
    # own (`outlast ops tenants set`); 0: no cap, and nothing paid for slots at claim.
    max_running_per_tenant: int = Field(default=0, alias="maxRunningPerTenant", ge=0, le=10_000)
    # A claim that finds every slot held defers the job by this, jittered 0.5-1.5x: at most 600,
    # so the longest jittered delay is still one SQS can hold (900 s), never silently clipped.
    slot_retry_seconds: float = Field(
        default=5, alias="slotRetrySeconds", gt=0, le=MAX_DELAY_SECONDS / SLOT_RETRY_JITTER[1]
    )

    # The worker.
    worker_timeout_seconds: int = Field(default=300, alias="workerTimeoutSeconds", ge=30)
    worker_max_concurrency: int = Field(default=10, alias="workerMaxConcurrency", ge=2, le=1000)
    # Invocations of one job each (crash isolation); Lambda's event source minimum is 2.
    isolation_max_concurrency: int = Field(default=2, alias="isolationMaxConcurrency", ge=2, le=1000)
    worker_memory_mb: int = Field(default=512, alias="workerMemoryMb", ge=128, le=10_240)
    lease_seconds: int = Field(default=60, alias="leaseSeconds", ge=5, le=900)
    heartbeat_seconds: float = Field(default=20, alias="heartbeatSeconds", gt=0, le=300)
    provider_timeout_seconds: float = Field(default=120, alias="providerTimeoutSeconds", gt=0, le=900)
    backoff_base_seconds: float = Field(default=2, alias="backoffBaseSeconds", gt=0, le=300)
    backoff_cap_seconds: float = Field(default=300, alias="backoffCapSeconds", gt=0, le=43_200)
    release_margin_seconds: float = Field(default=15, alias="releaseMarginSeconds", ge=1, le=300)

    # Long inputs (DESIGN.md, "Long inputs"): how submit plans jobs in steps, how many run at once.
    plan_version: str = Field(default=PLAN_VERSION, alias="planVersion", min_length=1)
    chunk_tokens: int = Field(default=DEFAULT_CHUNK_TOKENS, alias="chunkTokens", ge=100, le=1_000_000)
    step_output_tokens: int = Field(
        default=DEFAULT_STEP_OUTPUT_TOKENS, alias="stepOutputTokens", ge=16, le=16_384
    )
    # extract's steps answer with JSON objects (DESIGN.md, "Structured extraction"): their own budget.
    extract_step_output_tokens: int = Field(
        default=DEFAULT_EXTRACT_STEP_OUTPUT_TOKENS, alias="extractStepOutputTokens", ge=16, le=16_384
    )
    step_concurrency: int = Field(default=4, alias="stepConcurrency", ge=1, le=32)

    # Streaming output (DESIGN.md, "Streaming output"): the worker writes an event when its buffer
    # holds this many bytes (at most 900, so an event stays one write unit) or this long after its
    # last write; the first delta at once.
    stream_flush_bytes: int = Field(default=900, alias="streamFlushBytes", ge=16, le=900)
    stream_flush_ms: int = Field(default=500, alias="streamFlushMs", ge=10, le=60_000)

    # DynamoDB capacity (every table and global secondary index alike, each scaled on its own).
    billing_mode: Annotated[CapacityMode, BeforeValidator(_capacity_mode)] = Field(
        default=CapacityMode.ON_DEMAND, alias="billingMode"
    )
    min_read_capacity: int = Field(default=1, alias="minReadCapacity", ge=1, le=DYNAMODB_MAX_CAPACITY)
    max_read_capacity: int = Field(default=1000, alias="maxReadCapacity", ge=1, le=DYNAMODB_MAX_CAPACITY)
    min_write_capacity: int = Field(default=1, alias="minWriteCapacity", ge=1, le=DYNAMODB_MAX_CAPACITY)
    max_write_capacity: int = Field(default=1000, alias="maxWriteCapacity", ge=1, le=DYNAMODB_MAX_CAPACITY)
    capacity_target_utilization: int = Field(
        default=70,
        alias="capacityTargetUtilization",
        ge=AUTO_SCALING_TARGET_RANGE[0],
        le=AUTO_SCALING_TARGET_RANGE[1],
    )

    # Webhooks (DESIGN.md, "Webhooks for backends"): the retry schedule's scale (1 = 5 s ... 10 h;
    # local tests shrink it) and the failure-rate alarm.
    webhook_retry_scale: float = Field(default=1.0, alias="webhookRetryScale", gt=0, le=1)
    webhook_failure_alarm_percent: float = Field(default=50, alias="webhookFailureAlarmPercent", gt=0, le=100)
    webhook_failure_alarm_min_attempts: int = Field(default=20, alias="webhookFailureAlarmMinAttempts", ge=1)

    # Documents (DESIGN.md, "Documents"): how large a file and its text may be, how long a document
    # is kept, and the ingest function's size (measured: `make bench`, ingest section).
    max_document_bytes: int = Field(
        default=25 * 1024 * 1024, alias="maxDocumentBytes", ge=1, le=100 * 1024 * 1024
    )
    max_extracted_bytes: int = Field(
        default=8 * 1024 * 1024, alias="maxExtractedBytes", ge=1, le=64 * 1024 * 1024
    )
    max_document_pages: int = Field(default=2000, alias="maxDocumentPages", ge=1, le=100_000)
    document_retention_days: int = Field(default=30, alias="documentRetentionDays", ge=1, le=365)
    ingest_memory_mb: int = Field(default=2048, alias="ingestMemoryMb", ge=512, le=10_240)
    ingest_max_concurrency: int = Field(default=5, alias="ingestMaxConcurrency", ge=2, le=1000)

    # The sweeper.
    sweep_schedule: str = Field(
        default="rate(1 minute)", alias="sweepSchedule", pattern=r"^(rate|cron)\(.+\)$"
    )
    dispatch_grace_seconds: int = Field(default=900, alias="dispatchGraceSeconds", ge=1, le=86_400)
    sweep_look_seconds: int = Field(default=300, alias="sweepLookSeconds", ge=1, le=3600)

    @classmethod
    def from_context(cls, lookup: Callable[[str], Any]) -> Self:
        """Read every key through `lookup` (e.g. `node.try_get_context`); unset keys take defaults."""
        aliases = [field.alias for field in cls.model_fields.values() if field.alias is not None]
        raw = {alias: value for alias in aliases if (value := lookup(alias)) is not None}
        return cls.model_validate(raw)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"must be one of {sorted(LOG_RETENTION_DAYS)}")
        return value

    @field_validator("alarm_email", "openai_base_url", "console_origin", "auth_domain_prefix", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("alarm_email")
    @classmethod
    def _email(cls, value: str | None) -> str | None:
        if value is not None and not _EMAIL.match(value):
            raise ValueError("not an email address")
        return value

    @field_validator("console_origin")
    @classmethod
    def _origin(cls, value: str | None) -> str | None:
        if value is not None and not _ORIGIN.match(value):
            raise ValueError("must be an https origin: https://host[:port], no path")
        return value

    @field_validator("cors_allowed_origins")
    @classmethod
    def _origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for origin in value:
            if not _ANY_ORIGIN.match(origin):
                raise ValueError(
                    f"{origin!r} is not an origin: list each as http(s)://host[:port], no path; "
                    "CORS never allows any origin (*)"
                )
        return value

    @field_validator("auth_domain_prefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        # Cognito refuses prefixes that name AWS, Amazon or Cognito.
        if value is not None and any(word in value for word in ("aws", "amazon", "cognito")):
            raise ValueError("must not contain aws, amazon or cognito (Cognito refuses them)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = [
            message
            for broken, message in (
                (
                    self.worker_timeout_seconds > LAMBDA_MAX_TIMEOUT_SECONDS,
                    f"workerTimeoutSeconds must be at most {LAMBDA_MAX_TIMEOUT_SECONDS}",
                ),
                (
                    self.provider_timeout_seconds + self.release_margin_seconds
                    >= self.worker_timeout_seconds,
                    "providerTimeoutSeconds + releaseMarginSeconds must be below workerTimeoutSeconds",
                ),
                (
                    self.flex_timeout_seconds + self.release_margin_seconds >= self.worker_timeout_seconds,
                    "flexTimeoutSeconds + releaseMarginSeconds must be below workerTimeoutSeconds",
                ),
                (
                    not set(self.allowed_tiers) <= {"standard", "flex", "batch"},
                    "allowedTiers may hold standard, flex and batch",
                ),
                (self.heartbeat_seconds >= self.lease_seconds, "heartbeatSeconds must be below leaseSeconds"),
                (
                    self.backoff_base_seconds > self.backoff_cap_seconds,
                    "backoffBaseSeconds must not exceed backoffCapSeconds",
                ),
                (
                    self.idempotency_ttl_hours > self.job_retention_days * 24,
                    "idempotencyTtlHours must not exceed the job retention (DESIGN.md, Idempotency)",
                ),
                (self.default_model not in self.allowed_models, "defaultModel must be in allowedModels"),
                (
                    self.api_throttle_burst_limit < self.api_throttle_rate_limit,
                    "apiThrottleBurstLimit must be at least apiThrottleRateLimit",
                ),
                (
                    self.min_read_capacity > self.max_read_capacity,
                    "minReadCapacity must not exceed maxReadCapacity",
                ),
                (
                    self.min_write_capacity > self.max_write_capacity,
                    "minWriteCapacity must not exceed maxWriteCapacity",
                ),
            )
            if broken
        ]
        for parameters, operations in (
            (self.plan, [op for op in Operation if op is not Operation.EXTRACT]),
            (self.extract_plan, [Operation.EXTRACT]),
        ):
            try:
                check_plan_parameters(parameters, operations)
            except ValueError as error:
                problems.append(str(error))
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def api_cors_origins(self) -> tuple[str, ...]:
        """What the HTTP API's CORS allows: the console's origin and `corsAllowedOrigins`, never any
        (`*`): with neither set, no browser origin (synth says how to set one)."""
        origins = ((self.console_origin,) if self.console_origin else ()) + self.cors_allowed_origins
        return tuple(dict.fromkeys(origins))

    @property
    def plan(self) -> PlanParameters:
        """What submit plans new jobs with (checked at synth: a reduce of two outputs must fit)."""
        return PlanParameters(
            plan_version=self.plan_version,
            chunk_tokens=self.chunk_tokens,
            step_output_tokens=self.step_output_tokens,
        )

    @property
    def extract_plan(self) -> PlanParameters:
        """What submit plans new extract jobs with: their steps' own output budget."""
        return self.plan.model_copy(update={"step_output_tokens": self.extract_step_output_tokens})

    @property
    def jobs_queue_visibility_seconds(self) -> int:
        """6 x the worker timeout + the batching window (DESIGN.md, "Cost discipline")."""
        return VISIBILITY_TIMEOUT_FACTOR * self.worker_timeout_seconds + WORKER_BATCH_WINDOW_SECONDS

    @property
    def dlq_max_receive_count(self) -> int:
        """maxAttempts + 3 (DESIGN.md, "Delivery and execution")."""
        return self.max_attempts + DLQ_EXTRA_RECEIVES

    @property
    def document_object_expiration_days(self) -> int:
        """A document's objects must outlive its record, which a pin keeps until the pinning job's
        expiry: a job is gone at submit + jobRetentionDays (nothing shorter bounds it), and a
        document takes jobs only within its retention. S3 counts whole days from an object's
        creation, which is after the document's."""
        return self.document_retention_days + self.job_retention_days

    @property
    def input_object_expiration_days(self) -> int:
        """S3 expires objects by age in whole days: a job's run plus the retention after it ends."""
        return math.ceil(self.input_retention_hours / 24) + 1
