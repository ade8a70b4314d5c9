"""Settings of the status function (status, result, list and cancel)."""

from pydantic import Field

from shared import resources as r
from shared.settings import BudgetStorageSettings, JobPolicySettings, StorageSettings


class StatusSettings(StorageSettings, JobPolicySettings, BudgetStorageSettings):
    """Where jobs live, the secret that signs list cursors, the budget ledger (which says
    whether an ended job's reservation is settled yet) and streaming jobs' output events."""

    cursor_secret: str = Field(alias=r.ENV_CURSOR_SECRET, min_length=1)
    output_events_table: str = Field(alias=r.ENV_OUTPUT_EVENTS_TABLE, min_length=1)
    secret_max_age_seconds: int = Field(default=300, alias="SECRET_MAX_AGE_SECONDS", ge=0, le=3600)
