"""The Webhooks construct: the table and its secret-free index, the queue and DLQ, the sender, alarms."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.names import WEBHOOKS, WEBHOOKS_DLQ, WEBHOOKS_QUEUE, WEBHOOKS_TABLE, FunctionName, Output, Runbook
from shared import resources as r
from shared.webhooks.sender import MAX_ATTEMPTS, SENDER_TIMEOUT_SECONDS
from tests.infra.conftest import Synthesized
from tests.support.aws import webhooks_table_definition

pytestmark = pytest.mark.infra

SECRET_ATTRIBUTES = {"secret", "previousSecret"}


def _function(synthesized: Synthesized, name: FunctionName) -> dict[str, Any]:
    home = WEBHOOKS if name is FunctionName.WEBHOOK_SENDER else "Realtime"
    return synthesized.resources[synthesized.logical_id(home, f"{name.construct_id}Function")]


def test_the_table_is_the_one_the_tests_build_and_its_index_projects_no_secret(
    synthesized: Synthesized,
) -> None:
    table = synthesized.resources[synthesized.logical_id(WEBHOOKS, WEBHOOKS_TABLE)]["Properties"]
    expected = webhooks_table_definition("unused")

    assert table["KeySchema"] == expected["KeySchema"]
    assert sorted(table["AttributeDefinitions"], key=str) == sorted(expected["AttributeDefinitions"], key=str)
    (index,) = table["GlobalSecondaryIndexes"]
    (expected_index,) = expected["GlobalSecondaryIndexes"]
    assert index["IndexName"] == expected_index["IndexName"]
    assert index["KeySchema"] == expected_index["KeySchema"]
    assert index["Projection"]["ProjectionType"] == "INCLUDE"
    assert set(index["Projection"]["NonKeyAttributes"]) == set(r.WEBHOOKS_TENANT_INDEX_PROJECTION)
    assert not SECRET_ATTRIBUTES & set(index["Projection"]["NonKeyAttributes"])


def test_the_table_is_encrypted_recoverable_expires_deliveries_and_is_kept(synthesized: Synthesized) -> None:
    resource = synthesized.resources[synthesized.logical_id(WEBHOOKS, WEBHOOKS_TABLE)]
    properties = resource["Properties"]

    assert properties["SSESpecification"] == {"SSEEnabled": True}
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["TimeToLiveSpecification"] == {"AttributeName": r.TTL_ATTRIBUTE, "Enabled": True}
    assert resource["DeletionPolicy"] == "Retain"  # retainData defaults on: endpoints are configuration


def test_the_notifier_may_query_the_index_only_never_the_table(synthesized: Synthesized) -> None:
    role = synthesized.logical_id("Realtime", "NotifierRole")
    table = synthesized.logical_id(WEBHOOKS, WEBHOOKS_TABLE)
    resources = []
    for policy in synthesized.of_type("AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            rendered = json.dumps(statement["Resource"])
            if table in rendered:
                resources.append((statement["Action"], rendered))

    assert resources == [
        (
            "dynamodb:Query",
            json.dumps(
                {"Fn::Join": ["", [{"Fn::GetAtt": [table, "Arn"]}, f"/index/{r.WEBHOOKS_TENANT_INDEX}"]]}
            ),
        )
    ]


def test_the_queue_retries_through_visibility_and_catches_crash_loops_on_its_dlq(
    synthesized: Synthesized,
) -> None:
    queue = synthesized.resources[synthesized.logical_id(WEBHOOKS, WEBHOOKS_QUEUE)]["Properties"]
    dlq = synthesized.logical_id(WEBHOOKS, WEBHOOKS_DLQ)

    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq, "Arn"]},
        "maxReceiveCount": 10,
    }
    assert queue["RedrivePolicy"]["maxReceiveCount"] > MAX_ATTEMPTS  # the sender parks after 7 itself
    assert queue["VisibilityTimeout"] >= SENDER_TIMEOUT_SECONDS
    assert queue["MessageRetentionPeriod"] == 4 * 24 * 3600
    assert synthesized.resources[dlq]["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_the_sender_reads_the_queue_in_batches_with_partial_failures(synthesized: Synthesized) -> None:
    sender = synthesized.logical_id(WEBHOOKS, "WebhookSenderFunction")
    queue = synthesized.logical_id(WEBHOOKS, WEBHOOKS_QUEUE)
    (mapping,) = [
        m["Properties"]
        for m in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": sender}
    ]

    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == 10
    assert (
        _function(synthesized, FunctionName.WEBHOOK_SENDER)["Properties"]["Timeout"] == SENDER_TIMEOUT_SECONDS
    )


def test_the_local_only_egress_flag_is_off_in_the_template(synthesized: Synthesized) -> None:
    variables = _function(synthesized, FunctionName.WEBHOOK_SENDER)["Properties"]["Environment"]["Variables"]

    assert variables[r.ENV_WEBHOOK_LOCAL_EGRESS] == "false"
    assert variables[r.ENV_WEBHOOK_RETRY_SCALE] == "1"


def test_webhook_alarms_link_their_runbook_sections(synthesized: Synthesized) -> None:
    descriptions = [
        a["Properties"]["AlarmDescription"] for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()
    ]

    for anchor in (Runbook.WEBHOOKS_DLQ_NOT_EMPTY, Runbook.WEBHOOK_FAILURE_RATE):
        assert [d for d in descriptions if anchor.link in d], anchor


def test_the_failure_rate_alarm_divides_failed_by_all_attempts_of_the_sender(
    synthesized: Synthesized,
) -> None:
    (alarm,) = [
        a["Properties"]
        for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()
        if Runbook.WEBHOOK_FAILURE_RATE.link in a["Properties"]["AlarmDescription"]
    ]
    queries = {q["Id"]: q for q in alarm["Metrics"]}

    assert "100 * failures / attempts" in next(q["Expression"] for q in queries.values() if "Expression" in q)
    for query_id, metric_name in (
        ("attempts", r.WEBHOOK_ATTEMPTS_METRIC),
        ("failures", r.WEBHOOK_FAILURES_METRIC),
    ):
        metric = queries[query_id]["MetricStat"]["Metric"]
        assert metric["MetricName"] == metric_name
        assert metric["Dimensions"] == [{"Name": "service", "Value": FunctionName.WEBHOOK_SENDER.service}]
    assert alarm["Threshold"] == 50


def test_the_webhook_resources_are_stack_outputs(synthesized: Synthesized) -> None:
    outputs = synthesized.template.to_json()["Outputs"]

    for key in (Output.WEBHOOKS_TABLE_NAME, Output.WEBHOOKS_QUEUE_URL, Output.WEBHOOKS_DLQ_URL):
        assert key.value in outputs
