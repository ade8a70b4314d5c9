"""Settings of the batch poller function."""

from pydantic import Field

from shared import resources as r
from shared.settings import BatchProviderSettings, BudgetStorageSettings, JobPolicySettings


class BatchPollerSettings(JobPolicySettings, BatchProviderSettings, BudgetStorageSettings):
    """The jobs and their payloads, the queues jobs go back to, the open batches, the provider, and
    the budgets late usage comes into."""

    jobs_table: str = Field(alias=r.ENV_JOBS_TABLE, min_length=1)
    payload_bucket: str = Field(alias=r.ENV_PAYLOAD_BUCKET, min_length=1)
    jobs_queue_url: str = Field(alias=r.ENV_JOBS_QUEUE_URL, min_length=1)
    isolation_queue_url: str = Field(alias=r.ENV_ISOLATION_QUEUE_URL, min_length=1)
    # Open batches seen per run (the table holds open batches only).
    max_batches_per_run: int = Field(default=100, alias="BATCH_POLL_MAX", ge=1, le=1000)
    # An intent this old names a batcher that died between its create and its record: the
    # batcher's timeout plus a margin (synth: infra.environment.batch_poller_environment).
    batch_intent_grace_seconds: int = Field(alias="BATCH_INTENT_GRACE_SECONDS", ge=1)
