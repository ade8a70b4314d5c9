"""Settings of the relay function, parsed without pydantic (its cold start: shared.env)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from shared import resources as r
from shared.env import EnvironmentReader


@dataclass(frozen=True)
class RelaySettings:
    """Where newly accepted jobs are dispatched."""

    jobs_queue_url: str

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> RelaySettings:
        """Read the settings from the environment (or a given mapping); SettingsError when wrong."""
        reader = EnvironmentReader(cls.__name__, os.environ if environ is None else environ)
        settings = cls(jobs_queue_url=reader.text(r.ENV_JOBS_QUEUE_URL))
        reader.check()
        return settings
