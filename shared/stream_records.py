"""DynamoDB stream records, parsed into the few facts the relay needs.

Parsed by hand, not by pydantic: the relay is the one function that imports no pydantic (its
cold start is boto3, Powertools and this; DESIGN.md, issue 17's "the relay without pydantic").
The rules are the model's: fields the relay does not read are ignored; `eventName` and
`dynamodb.SequenceNumber` (non-empty) are required strings; `NewImage`, when present, maps each
attribute name to a typed value (a mapping); a value of another type than the relay expects
reads as absent. Anything else is an UnreadableRecordError.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared import resources as r


class UnreadableRecordError(ValueError):
    """A stream record without the shape every record has (which part says why)."""


def _required_string(container: Mapping[str, Any], key: str, where: str) -> str:
    value = container.get(key)
    if not isinstance(value, str) or not value:
        raise UnreadableRecordError(f"{where}{key} must be a non-empty string")
    return value


@dataclass(frozen=True)
class StreamRecord:
    """One record of the jobs table's stream (NEW_IMAGE view)."""

    event_name: str
    sequence_number: str  # the record's position in its shard: the id of a partial batch failure
    new_image: Mapping[str, Mapping[str, Any]] | None

    @classmethod
    def parse(cls, raw: object) -> StreamRecord:
        """The record as Lambda delivers it, or UnreadableRecordError."""
        if not isinstance(raw, Mapping):
            raise UnreadableRecordError("a record must be an object")
        event_name = raw.get("eventName")
        if not isinstance(event_name, str):
            raise UnreadableRecordError("eventName must be a string")
        change = raw.get("dynamodb")
        if not isinstance(change, Mapping):
            raise UnreadableRecordError("dynamodb must be an object")
        sequence_number = _required_string(change, "SequenceNumber", "dynamodb.")
        image = change.get("NewImage")
        if image is not None and not (
            isinstance(image, Mapping)
            and all(isinstance(name, str) and isinstance(value, Mapping) for name, value in image.items())
        ):
            raise UnreadableRecordError("dynamodb.NewImage must map attribute names to typed values")
        return cls(event_name=event_name, sequence_number=sequence_number, new_image=image)

    def _string(self, attribute: str) -> str | None:
        value = (self.new_image or {}).get(attribute, {}).get("S")
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

    @property
    def tenant(self) -> str | None:
        """The tenant of a job item's new image (its owner key: `<tenant>#<sub>`)."""
        owner_key = self._string(r.LIST_INDEX_PARTITION)
        return owner_key.partition("#")[0] if owner_key else None
