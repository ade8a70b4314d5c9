"""EndpointStore on DynamoDB: the webhooks table (endpoints, secrets, delivery records).

Items (pk, sk):
- `ENDPOINT#<id>`, `ENDPOINT`: endpointId, endpointTenant (the tenant index's partition key),
  url, events, enabled, disabledReason, disabledAt, createdAt, and the secrets: secret,
  previousSecret, previousUntil. Written once (`attribute_not_exists`); a rotation is
  conditional on the secret it replaces.
- `ENDPOINT#<id>`, `DELIVERY#<event time>#<webhook id>`: one event for this endpoint, with
  every attempt in order (number, at, status, latencyMs, failure, outcome), its state and a
  TTL 30 days after the latest attempt. The event time leads the sort key, so an endpoint's
  deliveries read newest first; it comes from the stream record, so duplicates share an item.

The tenant index (`byTenant`) holds endpoint items only, without the secrets: the notifier is
granted Query on the index and nothing on the table.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from shared import resources as r
from shared.adapters.dynamo_errors import error_code, storage_errors
from shared.clock import epoch_seconds, from_iso, to_iso
from shared.webhooks.endpoints import (
    Attempt,
    Delivery,
    DeliveryMessage,
    DeliveryState,
    Endpoint,
    EndpointSecrets,
    StoredEndpoint,
)
from shared.webhooks.events import EventType
from shared.webhooks.ports import EndpointExistsError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_PK, _SK = r.WEBHOOKS_PARTITION_KEY, r.WEBHOOKS_SORT_KEY
_ENDPOINT_SORT = "ENDPOINT"
_DELIVERY_PREFIX = "DELIVERY#"
_CONDITION_FAILED = "ConditionalCheckFailedException"
# Endpoints per tenant are few (an operator adds them by hand): one page of the index holds them.
_PAGE = 1000


def endpoint_key(endpoint_id: str) -> dict[str, Any]:
    """The key of an endpoint item."""
    return {_PK: {"S": f"ENDPOINT#{endpoint_id}"}, _SK: {"S": _ENDPOINT_SORT}}


def delivery_key(message: DeliveryMessage) -> dict[str, Any]:
    """The key of a delivery item (the event time from the stream record, then the webhook id)."""
    return {
        _PK: {"S": f"ENDPOINT#{message.endpoint_id}"},
        _SK: {"S": f"{_DELIVERY_PREFIX}{to_iso(message.event_time)}#{message.webhook_id}"},
    }


def _optional_text(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    return str(value["S"]) if value and "S" in value else None


def _optional_instant(item: dict[str, Any], name: str) -> datetime | None:
    text = _optional_text(item, name)
    return from_iso(text) if text is not None else None


def endpoint_from_item(item: dict[str, Any]) -> Endpoint:
    """An endpoint from its item (base table or tenant index: no secret is read here)."""
    return Endpoint(
        endpoint_id=item["endpointId"]["S"],
        tenant=item[r.WEBHOOKS_TENANT_INDEX_PARTITION]["S"],
        url=item["url"]["S"],
        events=tuple(EventType(value["S"]) for value in item["events"]["L"]),
        created_at=from_iso(item["createdAt"]["S"]),
        enabled=bool(item["enabled"]["BOOL"]),
        disabled_reason=_optional_text(item, "disabledReason"),
        disabled_at=_optional_instant(item, "disabledAt"),
        previous_secret_until=_optional_instant(item, "previousUntil"),
    )


def _attempt_item(attempt: Attempt) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "number": {"N": str(attempt.number)},
        "at": {"S": to_iso(attempt.at)},
        "outcome": {"S": attempt.outcome.value},
    }
    if attempt.status is not None:
        fields["status"] = {"N": str(attempt.status)}
    if attempt.latency_ms is not None:
        fields["latencyMs"] = {"N": str(attempt.latency_ms)}
    if attempt.failure is not None:
        fields["failure"] = {"S": attempt.failure}
    return {"M": fields}


def _attempt_from(value: dict[str, Any]) -> Attempt:
    fields = value["M"]
    return Attempt(
        number=int(fields["number"]["N"]),
        at=from_iso(fields["at"]["S"]),
        status=int(fields["status"]["N"]) if "status" in fields else None,
        latency_ms=int(fields["latencyMs"]["N"]) if "latencyMs" in fields else None,
        failure=fields["failure"]["S"] if "failure" in fields else None,
        outcome=DeliveryState(fields["outcome"]["S"]),
    )


def delivery_from_item(item: dict[str, Any]) -> Delivery:
    """A delivery from its item."""
    return Delivery(
        endpoint_id=item[_PK]["S"].removeprefix("ENDPOINT#"),
        webhook_id=item["webhookId"]["S"],
        event_type=EventType(item["eventType"]["S"]),
        job_id=item["jobId"]["S"],
        event_time=from_iso(item["eventTime"]["S"]),
        state=DeliveryState(item["state"]["S"]),
        attempts=tuple(_attempt_from(value) for value in item.get("attempts", {}).get("L", [])),
    )


class DynamoEndpointStore:
    """Endpoints and deliveries in the webhooks table (injected low-level client).

    The notifier builds one too, and calls only `endpoints_of` (a Query on the tenant index,
    the one thing its role may do here).
    """

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    # --- endpoints ------------------------------------------------------------------------

    def add_endpoint(self, endpoint: Endpoint, secrets: EndpointSecrets) -> None:
        """One PutItem, only where no endpoint has this id."""
        item: dict[str, Any] = {
            **endpoint_key(endpoint.endpoint_id),
            "type": {"S": "endpoint"},
            "endpointId": {"S": endpoint.endpoint_id},
            r.WEBHOOKS_TENANT_INDEX_PARTITION: {"S": endpoint.tenant},
            "url": {"S": endpoint.url},
            "events": {"L": [{"S": event.value} for event in endpoint.events]},
            "enabled": {"BOOL": endpoint.enabled},
            "createdAt": {"S": to_iso(endpoint.created_at)},
            "secret": {"S": secrets.current},
        }
        if secrets.previous is not None and secrets.previous_until is not None:
            item["previousSecret"] = {"S": secrets.previous}
            item["previousUntil"] = {"S": to_iso(secrets.previous_until)}
        try:
            with storage_errors():
                self._client.put_item(
                    TableName=self._table,
                    Item=item,
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": _PK},
                )
        except ClientError as error:
            if error_code(error) == _CONDITION_FAILED:
                raise EndpointExistsError from None
            raise

    def get_endpoint(self, endpoint_id: str) -> StoredEndpoint | None:
        """One strongly consistent GetItem."""
        with storage_errors():
            item = self._client.get_item(
                TableName=self._table, Key=endpoint_key(endpoint_id), ConsistentRead=True
            ).get("Item")
        if item is None:
            return None
        return StoredEndpoint(
            endpoint=endpoint_from_item(item),
            secrets=EndpointSecrets(
                current=item["secret"]["S"],
                previous=_optional_text(item, "previousSecret"),
                previous_until=_optional_instant(item, "previousUntil"),
            ),
        )

    def endpoints_of(self, tenant: str) -> list[Endpoint]:
        """One Query on the tenant index (eventually consistent, as every index read is)."""
        return self._index_items(
            {
                "KeyConditionExpression": "#tenant = :tenant",
                "ExpressionAttributeNames": {"#tenant": r.WEBHOOKS_TENANT_INDEX_PARTITION},
                "ExpressionAttributeValues": {":tenant": {"S": tenant}},
            },
            query=True,
        )

    def all_endpoints(self) -> list[Endpoint]:
        """A Scan of the tenant index: endpoint items only, whatever the deliveries in the table."""
        return self._index_items({}, query=False)

    def _index_items(self, arguments: dict[str, Any], *, query: bool) -> list[Endpoint]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": r.WEBHOOKS_TENANT_INDEX,
            "Limit": _PAGE,
            **arguments,
        }
        found: list[Endpoint] = []
        while True:
            with storage_errors():
                page = self._client.query(**request) if query else self._client.scan(**request)
            found.extend(endpoint_from_item(item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return sorted(found, key=lambda e: (e.tenant, e.created_at, e.endpoint_id))
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def remove_endpoint(self, endpoint_id: str) -> Endpoint | None:
        """One DeleteItem returning what it deleted (its delivery records stay until their TTL)."""
        with storage_errors():
            old = self._client.delete_item(
                TableName=self._table, Key=endpoint_key(endpoint_id), ReturnValues="ALL_OLD"
            ).get("Attributes")
        return endpoint_from_item(old) if old else None

    def rotate_secret(self, endpoint_id: str, replaced: str, rotated: EndpointSecrets) -> bool:
        """One UpdateItem, conditional on the current secret being `replaced`."""
        if rotated.previous is None or rotated.previous_until is None:
            raise ValueError("a rotation keeps the previous secret for the overlap")
        return self._conditional_update(
            endpoint_id,
            "SET #secret = :new, #previous = :previous, #until = :until",
            "attribute_exists(#pk) AND #secret = :replaced",
            {"#secret": "secret", "#previous": "previousSecret", "#until": "previousUntil"},
            {
                ":new": {"S": rotated.current},
                ":previous": {"S": rotated.previous},
                ":until": {"S": to_iso(rotated.previous_until)},
                ":replaced": {"S": replaced},
            },
        )

    def set_enabled(self, endpoint_id: str, enabled: bool, reason: str | None, at: datetime) -> bool:
        """One UpdateItem on an existing endpoint: enabled again, or disabled with why and when."""
        if enabled:
            return self._conditional_update(
                endpoint_id,
                "SET #enabled = :true REMOVE #reason, #at",
                "attribute_exists(#pk)",
                {"#enabled": "enabled", "#reason": "disabledReason", "#at": "disabledAt"},
                {":true": {"BOOL": True}},
            )
        return self._conditional_update(
            endpoint_id,
            "SET #enabled = :false, #reason = :reason, #at = :at",
            "attribute_exists(#pk)",
            {"#enabled": "enabled", "#reason": "disabledReason", "#at": "disabledAt"},
            {":false": {"BOOL": False}, ":reason": {"S": reason or "disabled"}, ":at": {"S": to_iso(at)}},
        )

    def _conditional_update(
        self,
        endpoint_id: str,
        update: str,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
    ) -> bool:
        try:
            with storage_errors():
                self._client.update_item(
                    TableName=self._table,
                    Key=endpoint_key(endpoint_id),
                    UpdateExpression=update,
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#pk": _PK, **names},
                    ExpressionAttributeValues=values,
                )
        except ClientError as error:
            if error_code(error) == _CONDITION_FAILED:
                return False
            raise
        return True

    # --- deliveries ---------------------------------------------------------------------------

    def record_attempt(self, message: DeliveryMessage, attempt: Attempt, expires_at: datetime) -> None:
        """One UpdateItem: the delivery item is created by its first attempt, appended to after."""
        with storage_errors():
            self._client.update_item(
                TableName=self._table,
                Key=delivery_key(message),
                UpdateExpression=(
                    "SET #eventType = :eventType, #webhookId = :webhookId, #jobId = :jobId, "
                    "#eventTime = :eventTime, #state = :state, #ttl = :ttl, "
                    "#attempts = list_append(if_not_exists(#attempts, :none), :attempt)"
                ),
                ExpressionAttributeNames={
                    "#eventType": "eventType",
                    "#webhookId": "webhookId",
                    "#jobId": "jobId",
                    "#eventTime": "eventTime",
                    "#state": "state",
                    "#attempts": "attempts",
                    "#ttl": r.TTL_ATTRIBUTE,
                },
                ExpressionAttributeValues={
                    ":eventType": {"S": message.event_type.value},
                    ":webhookId": {"S": message.webhook_id},
                    ":jobId": {"S": message.job_id},
                    ":eventTime": {"S": to_iso(message.event_time)},
                    ":state": {"S": attempt.outcome.value},
                    ":none": {"L": []},
                    ":attempt": {"L": [_attempt_item(attempt)]},
                    ":ttl": {"N": str(epoch_seconds(expires_at))},
                },
            )

    def get_delivery(self, message: DeliveryMessage) -> Delivery | None:
        """One strongly consistent GetItem."""
        with storage_errors():
            item = self._client.get_item(
                TableName=self._table, Key=delivery_key(message), ConsistentRead=True
            ).get("Item")
        return delivery_from_item(item) if item is not None else None

    def deliveries_of(self, endpoint_id: str, limit: int) -> list[Delivery]:
        """One Query on the endpoint's partition, newest event first."""
        with storage_errors():
            page = self._client.query(
                TableName=self._table,
                KeyConditionExpression="#pk = :pk AND begins_with(#sk, :delivery)",
                ExpressionAttributeNames={"#pk": _PK, "#sk": _SK},
                ExpressionAttributeValues={
                    ":pk": {"S": f"ENDPOINT#{endpoint_id}"},
                    ":delivery": {"S": _DELIVERY_PREFIX},
                },
                ScanIndexForward=False,
                ConsistentRead=True,
                Limit=limit,
            )
        return [delivery_from_item(item) for item in page.get("Items", [])]
