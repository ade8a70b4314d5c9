"""Alarms say what to do and link the runbook; the dashboard and the outputs exist."""

from __future__ import annotations

import pytest

from infra.names import SWEEPER_RECOVERIES_METRIC, FunctionName, Output, Runbook

pytestmark = pytest.mark.infra


def test_every_alarm_says_what_to_do_and_links_the_runbook(synthesized):
    alarms = synthesized.of_type("AWS::CloudWatch::Alarm")

    assert alarms
    for alarm in alarms.values():
        description = alarm["Properties"]["AlarmDescription"]
        assert "What to do:" in description
        assert "docs/runbook.md#" in description


def test_alarms_cover_every_runbook_section(synthesized):
    descriptions = " ".join(
        a["Properties"]["AlarmDescription"] for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()
    )

    for anchor in Runbook:
        assert anchor.link in descriptions


def test_errors_and_throttles_are_alarmed_for_every_function(synthesized):
    metrics = [
        (a["Properties"]["MetricName"], a["Properties"]["Dimensions"][0]["Value"])
        for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("Namespace") == "AWS/Lambda" and a["Properties"]["MetricName"] != "IteratorAge"
    ]

    assert sorted(name for name, _ in metrics) == sorted(["Errors", "Throttles"] * len(FunctionName))


def test_sweeper_recoveries_alarm_reads_the_sweepers_custom_metric(synthesized):
    synthesized.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "outlast",
            "MetricName": SWEEPER_RECOVERIES_METRIC,
            "Dimensions": [{"Name": "service", "Value": FunctionName.SWEEPER.service}],
            "Statistic": "Sum",
        },
    )


def test_alarms_notify_the_topic_when_an_email_is_configured(synthesized):
    (topic,) = synthesized.of_type("AWS::SNS::Topic")
    synthesized.template.has_resource_properties(
        "AWS::SNS::Subscription",
        {"Protocol": "email", "Endpoint": "ops@example.com", "TopicArn": {"Ref": topic}},
    )
    for alarm in synthesized.of_type("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]


def test_a_dashboard_exists(synthesized):
    assert len(synthesized.of_type("AWS::CloudWatch::Dashboard")) == 1


def test_outputs_are_published_with_descriptions(synthesized):
    outputs = synthesized.template.to_json()["Outputs"]

    assert set(outputs) == {o.value for o in Output}
    for output in outputs.values():
        assert output["Description"]
