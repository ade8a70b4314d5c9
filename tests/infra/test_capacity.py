"""DynamoDB capacity: on demand by default; `billingMode=provisioned` auto scales every table and index."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from infra.config import CapacityMode, StageConfig
from infra.names import (
    BATCH,
    BATCHES_TABLE,
    BUDGETS,
    BUDGETS_TABLE,
    CONNECTIONS_TABLE,
    DOCUMENTS,
    DOCUMENTS_TABLE,
    FAIRNESS,
    IDEMPOTENCY_TABLE,
    JOBS_TABLE,
    OUTPUT_EVENTS_TABLE,
    REALTIME,
    SLOTS_TABLE,
    STORAGE,
    STREAMING,
    WEBHOOKS,
    WEBHOOKS_TABLE,
)
from shared import resources as r
from tests.infra.conftest import PROVISIONED_CONTEXT, Synthesized

pytestmark = pytest.mark.infra

TABLES = [
    (STORAGE, JOBS_TABLE),
    (STORAGE, IDEMPOTENCY_TABLE),
    (REALTIME, CONNECTIONS_TABLE),
    (BUDGETS, BUDGETS_TABLE),
    (WEBHOOKS, WEBHOOKS_TABLE),
    (STREAMING, OUTPUT_EVENTS_TABLE),
    (DOCUMENTS, DOCUMENTS_TABLE),
    (FAIRNESS, SLOTS_TABLE),
    (BATCH, BATCHES_TABLE),
]
SCALABLE = "AWS::ApplicationAutoScaling::ScalableTarget"
POLICY = "AWS::ApplicationAutoScaling::ScalingPolicy"


def _resource_id(target: dict[str, Any]) -> tuple[str, str]:
    """(table logical id, "" or "/index/<name>") from a scalable target's ResourceId join."""
    parts = target["Properties"]["ResourceId"]["Fn::Join"][1]
    assert parts[0] == "table/"
    return parts[1]["Ref"], "".join(parts[2:])


def _targets(synth: Synthesized) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Scalable targets by (table logical id, index suffix, dimension)."""
    found = {}
    for logical_id, target in synth.of_type(SCALABLE).items():
        table, index = _resource_id(target)
        found[(table, index, target["Properties"]["ScalableDimension"])] = {"id": logical_id, **target}
    return found


def test_on_demand_is_the_default_and_scales_nothing(synthesized):
    # Given the default stage
    tables = synthesized.of_type("AWS::DynamoDB::Table")

    # Then every table is billed per request, with no capacity on it or its indexes
    assert {t["Properties"]["BillingMode"] for t in tables.values()} == {"PAY_PER_REQUEST"}
    for table in tables.values():
        assert "ProvisionedThroughput" not in table["Properties"]
        for index in table["Properties"].get("GlobalSecondaryIndexes", []):
            assert "ProvisionedThroughput" not in index
    # And there is nothing to auto scale
    assert synthesized.of_type(SCALABLE) == {}
    assert synthesized.of_type(POLICY) == {}


@pytest.mark.parametrize("path", TABLES)
def test_provisioned_tables_and_indexes_start_at_the_minimum(synthesized_provisioned, path):
    # Given a stage with billingMode=provisioned, minReadCapacity=2, minWriteCapacity=3
    properties = synthesized_provisioned.resources[synthesized_provisioned.logical_id(*path)]["Properties"]

    # Then the table is provisioned (CloudFormation's default mode) at the minimum capacity
    assert properties.get("BillingMode", "PROVISIONED") == "PROVISIONED"
    assert properties["ProvisionedThroughput"] == {"ReadCapacityUnits": 2, "WriteCapacityUnits": 3}
    # And so is each of its global secondary indexes, which DynamoDB bills separately
    for index in properties.get("GlobalSecondaryIndexes", []):
        assert index["ProvisionedThroughput"] == {"ReadCapacityUnits": 2, "WriteCapacityUnits": 3}


def test_provisioned_mode_auto_scales_every_table_and_index_in_both_dimensions(synthesized_provisioned):
    # Given a stage with billingMode=provisioned
    targets = _targets(synthesized_provisioned)
    indexes = [
        ((STORAGE, JOBS_TABLE), r.LIST_INDEX),
        ((STORAGE, JOBS_TABLE), r.SWEEP_INDEX),
        ((BUDGETS, BUDGETS_TABLE), r.BUDGET_CHECK_INDEX),
        ((WEBHOOKS, WEBHOOKS_TABLE), r.WEBHOOKS_TENANT_INDEX),
        ((DOCUMENTS, DOCUMENTS_TABLE), r.DOCUMENTS_PIN_INDEX),
    ]
    expected = {
        (synthesized_provisioned.logical_id(*path), "", f"dynamodb:table:{dimension}CapacityUnits")
        for path in TABLES
        for dimension in ("Read", "Write")
    } | {
        (
            synthesized_provisioned.logical_id(*path),
            f"/index/{index}",
            f"dynamodb:index:{dimension}CapacityUnits",
        )
        for path, index in indexes
        for dimension in ("Read", "Write")
    }

    # Then each table and each index has a read and a write target, and nothing else is scaled
    assert set(targets) == expected
    # And each target runs between the stage's bounds, through DynamoDB's service-linked role
    for (_, _, dimension), target in targets.items():
        properties = target["Properties"]
        bounds = (2, 200) if "Read" in dimension else (3, 300)
        assert (properties["MinCapacity"], properties["MaxCapacity"]) == bounds, dimension
        role = "".join(str(part) for part in properties["RoleARN"]["Fn::Join"][1])
        assert role.endswith("AWSServiceRoleForApplicationAutoScaling_DynamoDBTable")


def test_every_scalable_target_tracks_70_percent_utilisation(synthesized_provisioned):
    # Given the provisioned stage's scalable targets and scaling policies
    targets = {t["id"]: t for t in _targets(synthesized_provisioned).values()}
    policies = synthesized_provisioned.of_type(POLICY).values()

    # Then each target has exactly one target-tracking policy, at 70% of its own dimension's use
    tracked = [p["Properties"]["ScalingTargetId"]["Ref"] for p in policies]
    assert sorted(tracked) == sorted(targets)
    for policy in policies:
        properties = policy["Properties"]
        target = targets[properties["ScalingTargetId"]["Ref"]]
        configuration = properties["TargetTrackingScalingPolicyConfiguration"]
        dimension = "Read" if "Read" in target["Properties"]["ScalableDimension"] else "Write"
        assert properties["PolicyType"] == "TargetTrackingScaling"
        assert configuration["TargetValue"] == 70
        assert configuration["PredefinedMetricSpecification"] == {
            "PredefinedMetricType": f"DynamoDB{dimension}CapacityUtilization"
        }


def _config(**context: object) -> StageConfig:
    return StageConfig.from_context(context.get)


@pytest.mark.parametrize("spelling", ["provisioned", "Provisioned", " PROVISIONED "])
def test_billing_mode_accepts_provisioned_in_any_case(spelling):
    assert _config(billingMode=spelling).billing_mode is CapacityMode.PROVISIONED


@pytest.mark.parametrize("spelling", ["onDemand", "on-demand", "ON_DEMAND", "PAY_PER_REQUEST"])
def test_billing_mode_accepts_on_demand_spellings(spelling):
    assert _config(billingMode=spelling).billing_mode is CapacityMode.ON_DEMAND


def test_the_provisioned_test_stage_is_valid():
    config = _config(**{k: v for k, v in PROVISIONED_CONTEXT.items() if k != "alarmEmail"})

    assert config.billing_mode is CapacityMode.PROVISIONED
    assert config.capacity_target_utilization == 70
    assert (config.min_read_capacity, config.max_read_capacity) == (2, 200)


@pytest.mark.parametrize(
    "context",
    [
        {"billingMode": "reserved"},
        {"minReadCapacity": 10, "maxReadCapacity": 5},
        {"minWriteCapacity": 10, "maxWriteCapacity": 5},
        {"minWriteCapacity": 0},
        {"maxReadCapacity": 40_001},
        {"capacityTargetUtilization": 95},
        {"capacityTargetUtilization": 10},
    ],
)
def test_bad_capacity_settings_fail_the_synth(context):
    with pytest.raises(ValidationError):
        StageConfig.model_validate(context)
