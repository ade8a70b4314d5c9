"""Settings of the worker function."""

from pydantic import Field

from shared import resources as r
from shared.settings import JobPolicySettings, SlotStorageSettings
from shared.slots import SLOT_RETRY_JITTER


class WorkerSettings(JobPolicySettings, SlotStorageSettings):
    """Storage, queues, the provider and the timing of leases, retries and releases."""

    jobs_table: str = Field(alias=r.ENV_JOBS_TABLE, min_length=1)
    payload_bucket: str = Field(alias=r.ENV_PAYLOAD_BUCKET, min_length=1)
    jobs_queue_url: str = Field(alias=r.ENV_JOBS_QUEUE_URL, min_length=1)
    dlq_url: str = Field(alias=r.ENV_DLQ_URL, min_length=1)
    isolation_queue_url: str = Field(alias=r.ENV_ISOLATION_QUEUE_URL, min_length=1)
    isolation_queue_arn: str = Field(alias=r.ENV_ISOLATION_QUEUE_ARN, min_length=1)
    isolation_dlq_url: str = Field(alias=r.ENV_ISOLATION_DLQ_URL, min_length=1)
    openai_secret: str = Field(alias=r.ENV_OPENAI_SECRET, min_length=1)
    openai_base_url: str | None = Field(default=None, alias="OPENAI_BASE_URL")
    secret_max_age_seconds: int = Field(default=300, alias="SECRET_MAX_AGE_SECONDS", ge=0, le=3600)
    lease_seconds: int = Field(default=60, alias="LEASE_SECONDS", ge=1, le=900)
    heartbeat_seconds: float = Field(default=20, alias="HEARTBEAT_SECONDS", gt=0, le=300)
    provider_timeout_seconds: float = Field(default=120, alias="PROVIDER_TIMEOUT_SECONDS", gt=0, le=900)
    # A flex call may queue at the provider (DESIGN.md, "Cost tiers"): its own timeout, and none
    # starts with less than it left before the release margin.
    flex_timeout_seconds: float = Field(default=240, alias="FLEX_TIMEOUT_SECONDS", gt=0, le=900)
    # Since submit: a flex job still refused after this long sends its later calls at standard.
    flex_fallback_seconds: int = Field(default=3600, alias="FLEX_FALLBACK_SECONDS", ge=0, le=7 * 86_400)
    backoff_base_seconds: float = Field(default=2, alias="BACKOFF_BASE_SECONDS", gt=0, le=300)
    backoff_cap_seconds: float = Field(default=300, alias="BACKOFF_CAP_SECONDS", gt=0, le=43_200)
    release_margin_seconds: float = Field(default=15, alias="RELEASE_MARGIN_SECONDS", ge=1, le=300)
    # Steps of one multi-step job in flight at once (the invocation's model threads bound them all).
    step_concurrency: int = Field(default=4, alias="STEP_CONCURRENCY", ge=1, le=32)
    # Streaming output: where events go, and when a buffered delta is written (functions.worker.flush).
    output_events_table: str = Field(alias=r.ENV_OUTPUT_EVENTS_TABLE, min_length=1)
    # The batcher's queue (infra/constructs/batch.py sets it): a batch job's ready calls go there.
    batch_queue_url: str | None = Field(default=None, alias=r.ENV_BATCH_QUEUE_URL)
    stream_flush_bytes: int = Field(default=900, alias="STREAM_FLUSH_BYTES", ge=16, le=900)
    stream_flush_ms: int = Field(default=500, alias="STREAM_FLUSH_MS", ge=10, le=60_000)
    # A claim of a capped tenant's job that finds every running slot held defers it this long
    # (jittered, shared.slots): a fresh delayed message, no attempt charged. The stage's
    # slotRetrySeconds; at most what SQS can delay once jittered.
    slot_retry_seconds: float = Field(
        default=5, alias="SLOT_RETRY_SECONDS", gt=0, le=r.MAX_DELAY_SECONDS / SLOT_RETRY_JITTER[1]
    )
