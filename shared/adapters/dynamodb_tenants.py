"""A tenant's own settings beside its budget, in the budgets table (no stream).

`TENANT#{tenant}` / `RUNNING`: `maxRunning`, the tenant's running cap (DESIGN.md, "Fairness
between tenants"; 0: no cap, whatever the stage default). The submit's one budget read
(DynamoBudgetLedger.state) reads it with the limit and the counter, so setting a cap costs a
submit nothing more; operators write it here (`outlast ops tenants set`).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from shared import resources as r
from shared.adapters.dynamo_errors import storage_errors
from shared.adapters.dynamo_items import deserialize, serialize
from shared.clock import to_iso

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

RUNNING_SORT_KEY = "RUNNING"
MAX_RUNNING = "maxRunning"


def tenant_pk(tenant: str) -> str:
    """The partition of a tenant's limit, counters and settings."""
    return f"TENANT#{tenant}"


def running_key(tenant: str) -> dict[str, Any]:
    """The key of a tenant's own running cap."""
    return serialize({r.BUDGETS_PARTITION_KEY: tenant_pk(tenant), r.BUDGETS_SORT_KEY: RUNNING_SORT_KEY})


class DynamoTenantSettings:
    """Operators' reads and writes of a tenant's running cap; takes an injected DynamoDB client."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def set_max_running(self, tenant: str, max_running: int, now: datetime) -> None:
        """The tenant's own cap for jobs submitted from now on (0: none, whatever the default)."""
        item = {**deserialize(running_key(tenant)), MAX_RUNNING: max_running, "updatedAt": to_iso(now)}
        with storage_errors():
            self._client.put_item(TableName=self._table, Item=serialize(item))

    def clear_max_running(self, tenant: str) -> None:
        """Drop the tenant's own cap: the stage default applies again."""
        with storage_errors():
            self._client.delete_item(TableName=self._table, Key=running_key(tenant))

    def max_running(self, tenant: str) -> int | None:
        """The tenant's own cap, or None when the stage default applies (a strong read)."""
        with storage_errors():
            item = self._client.get_item(TableName=self._table, Key=running_key(tenant), ConsistentRead=True)
        found = item.get("Item")
        return int(deserialize(found)[MAX_RUNNING]) if found else None
