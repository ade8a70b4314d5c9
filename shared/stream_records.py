"""DynamoDB stream records, parsed into the few facts the relay needs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared import resources as r


class _Change(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    sequence_number: str = Field(alias="SequenceNumber", min_length=1)
    new_image: dict[str, dict[str, Any]] | None = Field(default=None, alias="NewImage")


class StreamRecord(BaseModel):
    """One record of the jobs table's stream (NEW_IMAGE view)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    event_name: str = Field(alias="eventName")
    dynamodb: _Change

    @property
    def sequence_number(self) -> str:
        """The record's position in its shard: the id of a partial batch failure."""
        return self.dynamodb.sequence_number

    def _string(self, attribute: str) -> str | None:
        value = (self.dynamodb.new_image or {}).get(attribute, {}).get("S")
        return value if isinstance(value, str) else None

    @property
    def item_type(self) -> str | None:
        """The `type` attribute of the new image (job, input or result)."""
        return self._string(r.TYPE_ATTRIBUTE)

    @property
    def job_id(self) -> str | None:
        """The job id of a job item's new image (its key: `JOB#<job id>`)."""
        key = self._string(r.PARTITION_KEY)
        return key.removeprefix("JOB#") if key is not None and key.startswith("JOB#") else None
