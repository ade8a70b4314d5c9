"""Settings of the sweeper function."""

from pydantic import Field

from shared import resources as r
from shared.settings import BudgetStorageSettings, JobPolicySettings, SlotStorageSettings


class SweeperSettings(JobPolicySettings, BudgetStorageSettings, SlotStorageSettings):
    """What counts as stuck, where recovered jobs are re-sent, and the budget ledger it repairs."""

    jobs_table: str = Field(alias=r.ENV_JOBS_TABLE, min_length=1)
    payload_bucket: str = Field(alias=r.ENV_PAYLOAD_BUCKET, min_length=1)
    jobs_queue_url: str = Field(alias=r.ENV_JOBS_QUEUE_URL, min_length=1)
    isolation_queue_url: str = Field(alias=r.ENV_ISOLATION_QUEUE_URL, min_length=1)
    # Pinned documents whose pins no terminal write removed (shared.documents.pin_repair).
    documents_table: str = Field(alias=r.ENV_DOCUMENTS_TABLE, min_length=1)
    lease_seconds: int = Field(default=60, alias="LEASE_SECONDS", ge=1, le=900)
    max_items_per_run: int = Field(default=1000, alias="SWEEP_MAX_ITEMS", ge=1, le=100_000)
