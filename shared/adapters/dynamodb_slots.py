"""SlotStore on DynamoDB: the slots table (no stream), one item per held slot.

Item: `pk` = `{group}#{k}` (the tenant's message group, shared.fairness, and the slot number),
`leaseToken`, `expiresAt` (epoch milliseconds: a number compares as time in a condition). A
released slot is deleted, so the table holds at most the slots held or expired. Every write is
conditional, one item, no transaction (DESIGN.md: a moto transaction is not atomic with a
stream; this table has none, and needs none).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from shared import resources as r
from shared.adapters.dynamo_errors import error_code, storage_errors
from shared.ports import Lease
from shared.slots import SlotLostError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_CONDITION_FAILED = "ConditionalCheckFailedException"


def slot_key(group: str, slot: int) -> str:
    """The partition key of one slot."""
    return f"{group}#{slot}"


def _millis(at: datetime) -> str:
    return str(int(at.timestamp() * 1000))


class DynamoSlotStore:
    """Takes, extends and releases slots with conditional writes; takes an injected client."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def _conditional(self, write: str, **arguments: object) -> bool:
        try:
            with storage_errors():
                getattr(self._client, write)(TableName=self._table, **arguments)
        except ClientError as error:
            if error_code(error) == _CONDITION_FAILED:
                return False
            raise
        return True

    def take(self, group: str, slot: int, lease: Lease, now: datetime) -> bool:
        """PutItem under `attribute_not_exists(pk) OR expiresAt < now`."""
        return self._conditional(
            "put_item",
            Item={
                r.SLOTS_PARTITION_KEY: {"S": slot_key(group, slot)},
                "leaseToken": {"S": lease.token},
                "expiresAt": {"N": _millis(lease.expires_at)},
            },
            ConditionExpression="attribute_not_exists(#pk) OR #expires < :now",
            ExpressionAttributeNames={"#pk": r.SLOTS_PARTITION_KEY, "#expires": "expiresAt"},
            ExpressionAttributeValues={":now": {"N": _millis(now)}},
        )

    def extend(self, group: str, slot: int, lease: Lease) -> None:
        """UpdateItem under `leaseToken = token`; SlotLostError otherwise."""
        held = self._conditional(
            "update_item",
            Key={r.SLOTS_PARTITION_KEY: {"S": slot_key(group, slot)}},
            UpdateExpression="SET #expires = :expires",
            ConditionExpression="#token = :token",
            ExpressionAttributeNames={"#expires": "expiresAt", "#token": "leaseToken"},
            ExpressionAttributeValues={
                ":expires": {"N": _millis(lease.expires_at)},
                ":token": {"S": lease.token},
            },
        )
        if not held:
            raise SlotLostError

    def release(self, group: str, slot: int, token: str) -> bool:
        """DeleteItem under `leaseToken = token`."""
        return self._conditional(
            "delete_item",
            Key={r.SLOTS_PARTITION_KEY: {"S": slot_key(group, slot)}},
            ConditionExpression="#token = :token",
            ExpressionAttributeNames={"#token": "leaseToken"},
            ExpressionAttributeValues={":token": {"S": token}},
        )
