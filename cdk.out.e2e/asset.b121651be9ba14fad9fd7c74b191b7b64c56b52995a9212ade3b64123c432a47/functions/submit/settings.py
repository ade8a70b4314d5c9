"""Settings of the submit function."""

from __future__ import annotations

from pydantic import Field

from shared.settings import JobPolicySettings, StorageSettings


class SubmitSettings(StorageSettings, JobPolicySettings):
    """Where to write and the policy applied to new jobs."""

    submits_per_minute: int = Field(default=60, alias="SUBMITS_PER_MINUTE", ge=1, le=100_000)
