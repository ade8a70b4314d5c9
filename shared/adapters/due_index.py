"""The one way both sweeps find their work: the sweeper's watched jobs (`bySweep`) and the budgets'
open reservations (`byCheck`) each live on a sparse index sharded by a hash, whose sort key is
when to look. A look is one Query of one shard for what is due, never a scan."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from shared.adapters.dynamo_errors import storage_errors
from shared.adapters.dynamo_items import serialize
from shared.clock import to_iso

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def query_due(
    client: DynamoDBClient,
    *,
    table: str,
    index: str,
    partition: str,
    sort: str,
    shard: str,
    due_by: datetime,
    limit: int,
) -> list[dict[str, Any]]:
    """The index entries of one shard due by `due_by`, soonest first, at most `limit`."""
    with storage_errors():
        response = client.query(
            TableName=table,
            IndexName=index,
            KeyConditionExpression="#shard = :shard AND #at <= :due",
            ExpressionAttributeNames={"#shard": partition, "#at": sort},
            ExpressionAttributeValues=serialize({":shard": shard, ":due": to_iso(due_by)}),
            Limit=limit,
        )
    return list(response.get("Items", []))
