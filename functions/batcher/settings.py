"""Settings of the batcher function."""

from pydantic import Field

from shared import resources as r
from shared.settings import BatchProviderSettings


class BatcherSettings(BatchProviderSettings):
    """The jobs it records batches on, the open batches' table, and the provider."""

    jobs_table: str = Field(alias=r.ENV_JOBS_TABLE, min_length=1)
