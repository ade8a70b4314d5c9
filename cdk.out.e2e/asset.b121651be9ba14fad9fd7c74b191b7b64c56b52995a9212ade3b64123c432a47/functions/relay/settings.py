"""Settings of the relay function."""

from __future__ import annotations

from pydantic import Field

from shared import resources as r
from shared.settings import EnvSettings


class RelaySettings(EnvSettings):
    """Where newly accepted jobs are dispatched."""

    jobs_queue_url: str = Field(alias=r.ENV_JOBS_QUEUE_URL, min_length=1)
