"""OpenBatchStore on DynamoDB: a table of open batches only (the poller deletes a batch it saw
through), so listing them is a Scan of what is open and nothing else."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared import resources as r
from shared.adapters.dynamo_errors import storage_errors
from shared.batches import OpenBatch

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_BODY = "batch"  # the open batch as JSON (its calls without their request bodies)


class DynamoOpenBatchStore:
    """One item per open batch: its id as the key, the batch as JSON."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def put(self, batch: OpenBatch) -> None:
        """Record a batch just created (a retry writes the same item again)."""
        with storage_errors():
            self._client.put_item(
                TableName=self._table,
                Item={r.BATCHES_PARTITION_KEY: {"S": batch.batch_id}, _BODY: {"S": batch.model_dump_json()}},
            )

    def list_open(self, limit: int) -> list[OpenBatch]:
        """Up to `limit` open batches (one Scan page: the table holds open batches only)."""
        with storage_errors():
            response = self._client.scan(TableName=self._table, Limit=limit, ConsistentRead=True)
        return [OpenBatch.model_validate_json(item[_BODY]["S"]) for item in response.get("Items", [])]

    def delete(self, batch_id: str) -> None:
        """The batch is seen through."""
        with storage_errors():
            self._client.delete_item(TableName=self._table, Key={r.BATCHES_PARTITION_KEY: {"S": batch_id}})
