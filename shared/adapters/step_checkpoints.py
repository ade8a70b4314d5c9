"""StepStore on DynamoDB: one item per checkpointed step, in the job's partition (`STEP#<step id>`).

A step's output is at most its `max_tokens` (800 by default, some kilobytes), so it always fits an
item. Items are written once (`attribute_not_exists`), so a second writer of a step (a worker that
lost its lease, a retried write) gets the stored checkpoint back and adopts it. They live one
retention after they were written (shared.retention): a checkpoint only matters while its job
runs, and an old job's claim renews them with its input.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from shared import resources as r
from shared.adapters.dynamo_errors import error_code, storage_errors
from shared.adapters.dynamo_items import job_pk, serialize
from shared.clock import epoch_seconds
from shared.errors import StorageUnavailableError
from shared.job import StepOutput

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

STEP_SORT_PREFIX = "STEP#"
_BODY = "body"


class DynamoStepStore:
    """Checkpoints in the jobs table; takes an injected low-level DynamoDB client."""

    def __init__(self, client: DynamoDBClient, jobs_table: str) -> None:
        self._client = client
        self._jobs_table = jobs_table

    def put_step(self, step: StepOutput, expires_at: datetime) -> StepOutput:
        """One conditional PutItem; on conflict the stored checkpoint comes back in the same call."""
        item = {
            **_key(step.job_id, step.step_id),
            r.TYPE_ATTRIBUTE: {"S": r.STEP_ITEM_TYPE},
            _BODY: {"S": step.model_dump_json()},
            r.TTL_ATTRIBUTE: {"N": str(epoch_seconds(expires_at))},
        }
        try:
            with storage_errors():
                self._client.put_item(
                    TableName=self._jobs_table,
                    Item=item,
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": r.PARTITION_KEY},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise
            stored: Any = error.response.get("Item")
            if not stored:  # pragma: no cover - DynamoDB returns ALL_OLD on a failed condition
                raise StorageUnavailableError("The stored checkpoint is not readable right now.") from None
            return StepOutput.model_validate_json(stored[_BODY]["S"])
        return step

    def get_steps(self, job_id: str, now: datetime) -> dict[str, StepOutput]:
        """Query of the job's partition for its STEP# items, strongly consistent; an expired
        checkpoint (TTL deletes late) is gone."""
        found: dict[str, StepOutput] = {}
        arguments: dict[str, Any] = {
            "TableName": self._jobs_table,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "FilterExpression": "#ttl > :now",
            "ExpressionAttributeNames": {"#pk": r.PARTITION_KEY, "#sk": r.SORT_KEY, "#ttl": r.TTL_ATTRIBUTE},
            "ExpressionAttributeValues": serialize(
                {":pk": job_pk(job_id), ":prefix": STEP_SORT_PREFIX, ":now": epoch_seconds(now)}
            ),
            "ConsistentRead": True,
        }
        while True:
            with storage_errors():
                response = self._client.query(**arguments)
            for item in response.get("Items", []):
                step = StepOutput.model_validate_json(item[_BODY]["S"])
                found[step.step_id] = step
            last = response.get("LastEvaluatedKey")
            if not last:
                return found
            arguments["ExclusiveStartKey"] = last

    def set_steps_expiry(self, job_id: str, step_ids: list[str], at: datetime) -> None:
        """Move each checkpoint's TTL (one UpdateItem each: only an old job's claim pays this)."""
        for step_id in step_ids:
            try:
                with storage_errors():
                    self._client.update_item(
                        TableName=self._jobs_table,
                        Key=_key(job_id, step_id),
                        UpdateExpression="SET #ttl = :ttl",
                        ConditionExpression="attribute_exists(#pk)",
                        ExpressionAttributeNames={"#ttl": r.TTL_ATTRIBUTE, "#pk": r.PARTITION_KEY},
                        ExpressionAttributeValues=serialize({":ttl": epoch_seconds(at)}),
                    )
            except ClientError as error:
                if error_code(error) != "ConditionalCheckFailedException":
                    raise


def _key(job_id: str, step_id: str) -> dict[str, Any]:
    return serialize({r.PARTITION_KEY: job_pk(job_id), r.SORT_KEY: f"{STEP_SORT_PREFIX}{step_id}"})
