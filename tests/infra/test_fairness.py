"""Fairness in the template: the running slots table (no stream, as the integration tests build
it), the alarm on the jobs queue's noisy groups, the outputs operators read, and the worker's
deferral delay from the stage's slotRetrySeconds."""

from __future__ import annotations

import pytest

from infra.config import StageConfig
from infra.names import FAIRNESS, SLOTS_TABLE, WORKER, Output, Runbook
from tests.support.aws import slots_table_definition

pytestmark = pytest.mark.infra


def test_the_slots_table_has_one_key_no_stream_and_matches_the_integration_tests(synthesized):
    # Slots are single-item conditional writes; no reader of a stream, no index, no TTL needed.
    expected = slots_table_definition("any")
    properties = synthesized.resources[synthesized.logical_id(FAIRNESS, SLOTS_TABLE)]["Properties"]

    assert "StreamSpecification" not in properties
    assert "GlobalSecondaryIndexes" not in properties
    assert properties["KeySchema"] == expected["KeySchema"]
    assert properties["AttributeDefinitions"] == expected["AttributeDefinitions"]
    assert properties["SSESpecification"]["SSEEnabled"] is True


def test_the_noisy_tenants_alarm_reads_the_jobs_queues_noisy_groups_for_fifteen_minutes(synthesized):
    [alarm] = [
        a["Properties"]
        for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "ApproximateNumberOfNoisyGroups"
    ]

    assert alarm["Namespace"] == "AWS/SQS"
    assert alarm["Statistic"] == "Maximum"
    assert (alarm["Period"], alarm["EvaluationPeriods"], alarm["Threshold"]) == (300, 3, 1)
    assert Runbook.NOISY_TENANTS.link in alarm["AlarmDescription"]


def test_operators_find_the_slots_table_and_the_stage_default_cap_in_the_outputs(synthesized):
    outputs = synthesized.template.to_json()["Outputs"]

    assert Output.SLOTS_TABLE_NAME in outputs
    assert outputs[Output.MAX_RUNNING_PER_TENANT]["Value"] == "0"


def test_the_worker_defers_for_a_slot_by_the_stages_slot_retry_seconds(synthesized):
    # The test stage leaves slotRetrySeconds unset: the worker gets the stage default, from synth
    worker = synthesized.resources[synthesized.logical_id(WORKER, "WorkerFunction")]["Properties"]

    assert worker["Environment"]["Variables"]["SLOT_RETRY_SECONDS"] == format(
        StageConfig().slot_retry_seconds, "g"
    )
