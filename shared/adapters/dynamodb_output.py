"""OutputEventStore on DynamoDB: one item per event in the output events table.

Items: `JOB#<job id>` / `<attempt:010>#<seq:010>` (zero-padded, so string order is (attempt, seq)
order and "after a cursor" is one key condition), `text`, and `ttl`. At most `streamFlushBytes`
(900) bytes of text with these keys stay within one write unit (1 KB): the worker's flush policy
never writes more. Written once with `attribute_not_exists`: an attempt belongs to one claim, so
a failed condition can only be this writer's own retried request, already done.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from shared import resources as r
from shared.adapters.dynamo_errors import error_code, storage_errors
from shared.adapters.dynamo_items import job_pk, serialize
from shared.clock import epoch_seconds
from shared.output import OutputCursor, OutputEvent

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_PK, _SK = r.OUTPUT_EVENTS_PARTITION_KEY, r.OUTPUT_EVENTS_SORT_KEY
_TEXT = "text"


def event_sort_key(attempt: int, seq: int) -> str:
    """The sort key of (attempt, seq): both zero-padded to 10 digits."""
    return f"{attempt:010d}#{seq:010d}"


def event_item(event: OutputEvent, expires_at: datetime) -> dict[str, Any]:
    """The item of one event, in attribute-value form."""
    return serialize(
        {
            _PK: job_pk(event.job_id),
            _SK: event_sort_key(event.attempt, event.seq),
            _TEXT: event.text,
            r.TTL_ATTRIBUTE: epoch_seconds(expires_at),
        }
    )


def event_from_item(item: dict[str, Any]) -> OutputEvent:
    """An event item (a table read's, or a stream record's NEW_IMAGE) as an OutputEvent."""
    attempt, _, seq = item[_SK]["S"].partition("#")
    return OutputEvent(
        job_id=item[_PK]["S"].removeprefix("JOB#"), attempt=int(attempt), seq=int(seq), text=item[_TEXT]["S"]
    )


class DynamoOutputEventStore:
    """Events in their own table; takes an injected low-level DynamoDB client."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def put_event(self, event: OutputEvent, expires_at: datetime) -> None:
        """One conditional PutItem (one write unit)."""
        try:
            with storage_errors():
                self._client.put_item(
                    TableName=self._table,
                    Item=event_item(event, expires_at),
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": _PK},
                )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise
            # Written already: by this writer's own earlier try of the same request.

    def events_after(self, job_id: str, after: OutputCursor, limit: int, now: datetime) -> list[OutputEvent]:
        """Queries of the job's partition after the cursor, strongly consistent, until `limit`
        live events are read or none are left (an expired one is filtered out)."""
        found: list[OutputEvent] = []
        arguments: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :pk AND #sk > :after",
            "FilterExpression": "#ttl > :now",
            "ExpressionAttributeNames": {"#pk": _PK, "#sk": _SK, "#ttl": r.TTL_ATTRIBUTE},
            "ExpressionAttributeValues": serialize(
                {
                    ":pk": job_pk(job_id),
                    ":after": event_sort_key(after.attempt, after.seq),
                    ":now": epoch_seconds(now),
                }
            ),
            "ConsistentRead": True,
        }
        while len(found) < limit:
            arguments["Limit"] = limit - len(found)
            with storage_errors():
                response = self._client.query(**arguments)
            found.extend(event_from_item(item) for item in response.get("Items", []))
            last = response.get("LastEvaluatedKey")
            if not last:
                break
            arguments["ExclusiveStartKey"] = last
        return found
