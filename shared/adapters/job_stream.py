"""Jobs-table stream records as domain changes: the job item's NEW_IMAGE, read like the table.

The mapping is the repository's own (`dynamo_items.job_from_item`), so a status document built
from a stream record is exactly what GET /v1/jobs/{id} answers for that revision. Nothing here
reads the table: the record says everything the notifier needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from shared import resources as r
from shared.adapters.dynamo_items import job_from_item
from shared.job import Caller
from shared.realtime import JobChange

_CHANGES = frozenset({"INSERT", "MODIFY"})


class UnreadableRecordError(ValueError):
    """A job record whose image cannot be read as a job (a bug or a hand-edited item)."""


def job_change(record: Mapping[str, Any]) -> JobChange | None:
    """The change a stream record describes, or None when it is not a job write (input, result, REMOVE).

    Raises UnreadableRecordError for a job item that does not parse.
    """
    dynamodb = record.get("dynamodb") or {}
    image = dynamodb.get("NewImage") or {}
    if record.get("eventName") not in _CHANGES or image.get(r.TYPE_ATTRIBUTE, {}).get("S") != r.JOB_ITEM_TYPE:
        return None
    try:
        job = job_from_item(image)
    except (KeyError, TypeError, ValueError, ValidationError) as error:
        raise UnreadableRecordError("the job image does not parse") from error
    return JobChange(
        sequence_number=str(dynamodb.get("SequenceNumber", "")),
        owner=Caller(tenant=job.tenant, sub=job.owner),
        job_id=job.job_id,
        revision=job.revision,
        write_kind=str(image.get(r.WRITE_KIND_ATTRIBUTE, {}).get("S", "")),
        document=job.status_document(),
        redrive_count=job.redrive_count,
    )
