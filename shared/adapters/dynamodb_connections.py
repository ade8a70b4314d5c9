"""ConnectionStore on DynamoDB: one table for tickets and connections, TTL on both.

Items (pk, sk):
- `TICKET#<sha256 of the ticket>`, `TICKET`: tenant, sub, expiresAt (epoch ms), ttl. Taken with one
  conditional DeleteItem (`attribute_exists(pk) AND expiresAt > :now`, ReturnValues ALL_OLD): the
  delete that succeeds is the only connect the ticket allows. TTL removes tickets nobody used.
- `OWNER#<tenant>#<sub>`, `CONN#<connection id>`: connectedAt (epoch ms), ttl (connectedAt + 2 h),
  and `follows`, the set of job ids the connection follows (at most 20). The owner's partition is
  what the notifier queries, so a post can only go to the owner's own connections; the sort key
  makes $disconnect and a 410 a single DeleteItem, which hands back the follows to forget.
- `FOLLOW#<job id>`, `CONN#<connection id>`: tenant, sub, connectedAt, ttl (the connection's): a
  follow of a job's output (DESIGN.md, "Streaming output"), written by the follow route after the
  owner check, read by the output pusher with one strongly consistent Query of the job's partition.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from shared import resources as r
from shared.adapters.dynamo_errors import error_code, storage_errors
from shared.clock import epoch_seconds
from shared.job import Caller
from shared.output_ports import ConnectionClosedError, Follow, TooManyFollowsError
from shared.realtime import CONNECTION_TTL, Connection, TicketRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_PK, _SK = r.CONNECTIONS_PARTITION_KEY, r.CONNECTIONS_SORT_KEY
_TICKET_SORT = "TICKET"
_CONNECTION_PREFIX = "CONN#"
_FOLLOWS = "follows"
# Far more than an owner may hold (10): one page always sees every recorded connection.
_QUERY_LIMIT = 100


def _millis(instant: datetime) -> int:
    return int(instant.timestamp() * 1000)


def _instant(millis: str) -> datetime:
    return datetime.fromtimestamp(int(millis) / 1000, tz=UTC)


def ticket_key(ticket_hash: str) -> dict[str, Any]:
    """The key of a ticket item."""
    return {_PK: {"S": f"TICKET#{ticket_hash}"}, _SK: {"S": _TICKET_SORT}}


def owner_partition(owner: Caller) -> str:
    """The partition of an owner's connections (tenant and sub never hold '#')."""
    return f"OWNER#{owner.owner_key}"


def connection_key(owner: Caller, connection_id: str) -> dict[str, Any]:
    """The key of a connection item."""
    return {_PK: {"S": owner_partition(owner)}, _SK: {"S": f"{_CONNECTION_PREFIX}{connection_id}"}}


def follow_partition(job_id: str) -> str:
    """The partition of a job's followers."""
    return f"FOLLOW#{job_id}"


def follow_key(job_id: str, connection_id: str) -> dict[str, Any]:
    """The key of a follow item."""
    return {_PK: {"S": follow_partition(job_id)}, _SK: {"S": f"{_CONNECTION_PREFIX}{connection_id}"}}


class DynamoConnectionStore:
    """Tickets and connections in the connections table (injected low-level client)."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def put_ticket(self, ticket: TicketRecord) -> None:
        """A new ticket item; its TTL is its own expiry (DynamoDB deletes it late, the condition never)."""
        with storage_errors():
            self._client.put_item(
                TableName=self._table,
                Item={
                    **ticket_key(ticket.ticket_hash),
                    "tenant": {"S": ticket.owner.tenant},
                    "sub": {"S": ticket.owner.sub},
                    "expiresAt": {"N": str(_millis(ticket.expires_at))},
                    r.TTL_ATTRIBUTE: {"N": str(epoch_seconds(ticket.expires_at) + 1)},
                },
                # A hash collision is as likely as guessing the ticket; never overwrite one.
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": _PK},
            )

    def take_ticket(self, ticket_hash: str, now: datetime) -> Caller | None:
        """One conditional DeleteItem: the owner when this call consumed a live ticket, else None."""
        try:
            with storage_errors():
                response = self._client.delete_item(
                    TableName=self._table,
                    Key=ticket_key(ticket_hash),
                    ConditionExpression="attribute_exists(#pk) AND #expiresAt > :now",
                    ExpressionAttributeNames={"#pk": _PK, "#expiresAt": "expiresAt"},
                    ExpressionAttributeValues={":now": {"N": str(_millis(now))}},
                    ReturnValues="ALL_OLD",
                )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return None  # never issued, already used, or expired
            raise
        item = response.get("Attributes") or {}
        if "tenant" not in item or "sub" not in item:  # pragma: no cover - the condition saw the item
            return None
        return Caller(tenant=item["tenant"]["S"], sub=item["sub"]["S"])

    def add_connection(self, connection: Connection) -> None:
        """Put the connection item (a repeated $connect of the same id rewrites the same item)."""
        with storage_errors():
            self._client.put_item(
                TableName=self._table,
                Item={
                    **connection_key(connection.owner, connection.connection_id),
                    "connectionId": {"S": connection.connection_id},
                    "connectedAt": {"N": str(_millis(connection.connected_at))},
                    r.TTL_ATTRIBUTE: {"N": str(epoch_seconds(connection.expires_at))},
                },
            )

    def connections_of(self, owner: Caller) -> list[Connection]:
        """One strongly consistent Query on the owner's partition (only the owner's connections)."""
        with storage_errors():
            response = self._client.query(
                TableName=self._table,
                KeyConditionExpression="#pk = :owner AND begins_with(#sk, :conn)",
                ExpressionAttributeNames={"#pk": _PK, "#sk": _SK},
                ExpressionAttributeValues={
                    ":owner": {"S": owner_partition(owner)},
                    ":conn": {"S": _CONNECTION_PREFIX},
                },
                ConsistentRead=True,
                Limit=_QUERY_LIMIT,
            )
        return [
            Connection(
                connection_id=item["connectionId"]["S"],
                owner=owner,
                connected_at=_instant(item["connectedAt"]["N"]),
            )
            for item in response.get("Items", [])
        ]

    def remove_connection(self, owner: Caller, connection_id: str) -> None:
        """One DeleteItem (unconditional: a connection already forgotten is forgotten), then one per
        job it followed (the deleted item names them)."""
        with storage_errors():
            response = self._client.delete_item(
                TableName=self._table, Key=connection_key(owner, connection_id), ReturnValues="ALL_OLD"
            )
        for job_id in (response.get("Attributes") or {}).get(_FOLLOWS, {}).get("SS", []):
            with storage_errors():
                self._client.delete_item(TableName=self._table, Key=follow_key(job_id, connection_id))


class DynamoFollowStore:
    """Follows of jobs' output in the connections table (injected low-level client)."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def add_follow(self, follow: Follow, limit: int) -> None:
        """The connection's list first (one conditional UpdateItem: the connection exists and
        follows fewer than `limit` jobs, or this one already), then the follow item."""
        try:
            with storage_errors():
                self._client.update_item(
                    TableName=self._table,
                    Key=connection_key(follow.owner, follow.connection_id),
                    UpdateExpression="ADD #follows :job",
                    ConditionExpression=(
                        "attribute_exists(#pk) AND (attribute_not_exists(#follows) "
                        "OR size(#follows) < :limit OR contains(#follows, :id))"
                    ),
                    ExpressionAttributeNames={"#pk": _PK, "#follows": _FOLLOWS},
                    ExpressionAttributeValues={
                        ":job": {"SS": [follow.job_id]},
                        ":id": {"S": follow.job_id},
                        ":limit": {"N": str(limit)},
                    },
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise
            if not error.response.get("Item"):
                raise ConnectionClosedError from None
            raise TooManyFollowsError from None
        expires_at = follow.connected_at + CONNECTION_TTL
        with storage_errors():
            self._client.put_item(
                TableName=self._table,
                Item={
                    **follow_key(follow.job_id, follow.connection_id),
                    "connectionId": {"S": follow.connection_id},
                    "tenant": {"S": follow.owner.tenant},
                    "sub": {"S": follow.owner.sub},
                    "connectedAt": {"N": str(_millis(follow.connected_at))},
                    r.TTL_ATTRIBUTE: {"N": str(epoch_seconds(expires_at))},
                },
            )

    def remove_follow(self, owner: Caller, connection_id: str, job_id: str) -> None:
        """The follow item, then the list entry (only on a recorded connection: an UpdateItem on a
        missing key would create it)."""
        self.forget_follower(job_id, connection_id)
        try:
            with storage_errors():
                self._client.update_item(
                    TableName=self._table,
                    Key=connection_key(owner, connection_id),
                    UpdateExpression="DELETE #follows :job",
                    ConditionExpression="attribute_exists(#pk)",
                    ExpressionAttributeNames={"#pk": _PK, "#follows": _FOLLOWS},
                    ExpressionAttributeValues={":job": {"SS": [job_id]}},
                )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise

    def followers(self, job_id: str) -> list[Follow]:
        """Strongly consistent Queries of the job's follow partition."""
        found: list[Follow] = []
        arguments: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "#pk = :job",
            "ExpressionAttributeNames": {"#pk": _PK},
            "ExpressionAttributeValues": {":job": {"S": follow_partition(job_id)}},
            "ConsistentRead": True,
        }
        while True:
            with storage_errors():
                response = self._client.query(**arguments)
            found.extend(
                Follow(
                    job_id=job_id,
                    connection_id=item["connectionId"]["S"],
                    owner=Caller(tenant=item["tenant"]["S"], sub=item["sub"]["S"]),
                    connected_at=_instant(item["connectedAt"]["N"]),
                )
                for item in response.get("Items", [])
            )
            last = response.get("LastEvaluatedKey")
            if not last:
                return found
            arguments["ExclusiveStartKey"] = last

    def forget_follower(self, job_id: str, connection_id: str) -> None:
        """One DeleteItem of the follow item (unconditional)."""
        with storage_errors():
            self._client.delete_item(TableName=self._table, Key=follow_key(job_id, connection_id))
