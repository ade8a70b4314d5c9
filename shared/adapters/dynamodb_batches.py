"""OpenBatchStore on DynamoDB: a table of open batches and the batcher's intents only (the poller
deletes a batch it saw through, the batcher an intent once its batch is recorded), so listing them
is a Scan of what is open and nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from shared import resources as r
from shared.adapters.dynamo_errors import error_code, storage_errors
from shared.batches import BatchIntent, OpenBatch, OpenEntries

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

_BODY = "batch"  # the open batch as JSON (its calls without their request bodies)
_INTENT = "intent"  # an intent as JSON, instead of a batch: the item is an intent
# An intent's key: no provider batch id starts with it (OpenAI's start `batch_`).
INTENT_KEY_PREFIX = "intent#"
_CONDITION_FAILED = "ConditionalCheckFailedException"


class DynamoOpenBatchStore:
    """One item per open batch (its provider id as the key, the batch as JSON) or per intent
    (`intent#<id>` as the key, the intent as JSON)."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def put(self, batch: OpenBatch) -> None:
        """Record a batch just created (a retry writes the same item again)."""
        with storage_errors():
            self._client.put_item(TableName=self._table, Item=_batch_item(batch))

    def put_orphan(self, batch: OpenBatch) -> bool:
        """`attribute_not_exists(pk)`: a batch its batcher recorded is never made an orphan."""
        try:
            with storage_errors():
                self._client.put_item(
                    TableName=self._table,
                    Item=_batch_item(batch),
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": r.BATCHES_PARTITION_KEY},
                )
        except ClientError as error:
            if error_code(error) != _CONDITION_FAILED:
                raise
            return False
        return True

    def list_open(self, limit: int) -> OpenEntries:
        """Up to `limit` entries (one Scan page: the table holds open batches and intents only)."""
        with storage_errors():
            response = self._client.scan(TableName=self._table, Limit=limit, ConsistentRead=True)
        items = response.get("Items", [])
        return OpenEntries(
            batches=tuple(OpenBatch.model_validate_json(item[_BODY]["S"]) for item in items if _BODY in item),
            intents=tuple(
                BatchIntent.model_validate_json(item[_INTENT]["S"]) for item in items if _INTENT in item
            ),
        )

    def delete(self, batch_id: str) -> None:
        """The batch is seen through."""
        self._delete(batch_id)

    def put_intent(self, intent: BatchIntent) -> None:
        """Written before the provider's create (its id is new: a retried write is the same item)."""
        with storage_errors():
            self._client.put_item(
                TableName=self._table,
                Item={
                    r.BATCHES_PARTITION_KEY: {"S": INTENT_KEY_PREFIX + intent.intent_id},
                    _INTENT: {"S": intent.model_dump_json()},
                },
            )

    def delete_intent(self, intent_id: str) -> None:
        """The intent is resolved."""
        self._delete(INTENT_KEY_PREFIX + intent_id)

    def _delete(self, key: str) -> None:
        with storage_errors():
            self._client.delete_item(TableName=self._table, Key={r.BATCHES_PARTITION_KEY: {"S": key}})


def _batch_item(batch: OpenBatch) -> dict[str, AttributeValueTypeDef]:
    return {r.BATCHES_PARTITION_KEY: {"S": batch.batch_id}, _BODY: {"S": batch.model_dump_json()}}
