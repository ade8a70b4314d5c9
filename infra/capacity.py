"""DynamoDB capacity: on demand, or provisioned with auto scaling on every table and index.

One stage option (`billingMode`, docs/configuration.md) for every table the app defines: the
jobs, idempotency, connections, budgets and webhooks tables and their global secondary indexes
(the jobs table's two, the budgets and webhooks tables' one each). In
provisioned mode each table and each index gets its own read and write capacity, starting at the
minimum, and its own target-tracking policies (Application Auto Scaling) that keep consumed
capacity at `capacityTargetUtilization` percent (default 70) of what is provisioned, between the
stage's minimum and maximum. An index's capacity is separate from its table's: an index that
cannot keep up throttles the table's writes, so each index scales on its own.

`cdk deploy` switches an existing table's mode in place (an update, not a replacement); DynamoDB
allows a switch from provisioned back to on demand at most four times in 24 hours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import aws_dynamodb as dynamodb

from infra.config import CapacityMode, StageConfig


def table_billing(config: StageConfig) -> dict[str, Any]:
    """The `Table` keyword arguments of the stage's mode: the billing mode and starting capacity."""
    if config.billing_mode is CapacityMode.ON_DEMAND:
        return {"billing_mode": dynamodb.BillingMode.PAY_PER_REQUEST}
    return {
        "billing_mode": dynamodb.BillingMode.PROVISIONED,
        "read_capacity": config.min_read_capacity,
        "write_capacity": config.min_write_capacity,
    }


def index_capacity(config: StageConfig) -> dict[str, Any]:
    """The `add_global_secondary_index` keyword arguments of the stage's mode (none on demand)."""
    if config.billing_mode is CapacityMode.ON_DEMAND:
        return {}
    return {"read_capacity": config.min_read_capacity, "write_capacity": config.min_write_capacity}


def auto_scale(table: dynamodb.Table, config: StageConfig, indexes: Sequence[str] = ()) -> None:
    """Target tracking at the stage's utilisation on the table's and each named index's capacity."""
    if config.billing_mode is CapacityMode.ON_DEMAND:
        return
    reads = {"min_capacity": config.min_read_capacity, "max_capacity": config.max_read_capacity}
    writes = {"min_capacity": config.min_write_capacity, "max_capacity": config.max_write_capacity}
    target = config.capacity_target_utilization
    scaled = [table.auto_scale_read_capacity(**reads), table.auto_scale_write_capacity(**writes)]
    for index in indexes:
        scaled.append(table.auto_scale_global_secondary_index_read_capacity(index, **reads))
        scaled.append(table.auto_scale_global_secondary_index_write_capacity(index, **writes))
    for attribute in scaled:
        attribute.scale_on_utilization(target_utilization_percent=target)
