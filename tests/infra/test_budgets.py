"""Token budgets in the template: a table without a stream (as the integration tests build it),
the GET /v1/budget function, the alarms and the outputs operators read."""

from __future__ import annotations

import pytest

from infra.names import BUDGETS, BUDGETS_TABLE, Output
from shared import resources as r
from shared.budgets import NEAR_LIMIT_PERCENT
from tests.support.aws import budgets_table_definition

pytestmark = pytest.mark.infra


def _table(synthesized):
    return synthesized.resources[synthesized.logical_id(BUDGETS, BUDGETS_TABLE)]["Properties"]


def test_the_budgets_table_has_no_stream_and_matches_the_integration_tests(synthesized):
    # Transactions on it are the budget's atomicity; a stream would make moto's copies racy and
    # would add a reader nobody needs.
    expected = budgets_table_definition("any")
    properties = _table(synthesized)

    assert "StreamSpecification" not in properties
    assert properties["KeySchema"] == expected["KeySchema"]
    assert sorted(properties["AttributeDefinitions"], key=str) == sorted(
        expected["AttributeDefinitions"], key=str
    )
    assert properties["GlobalSecondaryIndexes"] == expected["GlobalSecondaryIndexes"]


def test_the_budgets_table_is_encrypted_recoverable_and_expires_by_ttl(synthesized):
    properties = _table(synthesized)

    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["SSESpecification"]["SSEEnabled"] is True
    assert properties["TimeToLiveSpecification"] == {"AttributeName": r.TTL_ATTRIBUTE, "Enabled": True}


def test_the_near_limit_and_exhausted_alarms_read_the_submit_metrics(synthesized):
    alarms = {
        a["Properties"].get("MetricName"): a["Properties"]
        for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("Namespace") == "outlast"
    }

    near = alarms["BudgetCommittedPercent"]
    assert (near["Statistic"], near["Threshold"], near["ComparisonOperator"]) == (
        "Maximum",
        NEAR_LIMIT_PERCENT,
        "GreaterThanOrEqualToThreshold",
    )
    assert near["Dimensions"] == [{"Name": "service", "Value": "submit"}]
    exhausted = alarms["BudgetExceeded"]
    assert (exhausted["Statistic"], exhausted["Threshold"]) == ("Sum", 1)
    assert exhausted["Dimensions"] == [{"Name": "service", "Value": "submit"}]


def test_the_overruns_alarm_sums_both_settlers(synthesized):
    [overruns] = [
        a["Properties"]
        for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()
        if "Metrics" in a["Properties"] and "budget-overruns" in a["Properties"]["AlarmDescription"]
    ]
    services = {
        m["MetricStat"]["Metric"]["Dimensions"][0]["Value"] for m in overruns["Metrics"] if "MetricStat" in m
    }

    assert services == {"notifier", "sweeper"}
    assert overruns["Threshold"] == 1


def test_operators_find_the_table_and_the_stage_default_in_the_outputs(synthesized):
    outputs = synthesized.template.to_json()["Outputs"]

    assert outputs[Output.BUDGETS_TABLE_NAME]["Value"] == {
        "Ref": synthesized.logical_id(BUDGETS, BUDGETS_TABLE)
    }
    assert outputs[Output.DEFAULT_MONTHLY_TOKENS]["Value"] == "0"
