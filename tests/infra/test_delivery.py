"""Delivery: the outbox stream mapping, the worker's queue trigger, the queues, the sweeper schedule."""

from __future__ import annotations

import json

import pytest

from infra.config import WORKER_BATCH_SIZE, WORKER_BATCH_WINDOW_SECONDS, StageConfig
from infra.names import (
    BATCH,
    BATCH_QUEUE,
    ISOLATION_DLQ,
    ISOLATION_QUEUE,
    JOBS_DLQ,
    JOBS_QUEUE,
    JOBS_TABLE,
    OUTBOX,
    RELAY_FAILURE_QUEUE,
    STORAGE,
    SWEEPER,
    WORKER,
)
from shared import resources as r

pytestmark = pytest.mark.infra


def _mappings_of(synthesized, function_id):
    return [
        m["Properties"]
        for m in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": function_id}
    ]


def _mapping_of(synthesized, function_id, source=None):
    """The function's one event source mapping (or the one reading `source`, a logical id)."""
    mappings = _mappings_of(synthesized, function_id)
    if source is not None:
        mappings = [m for m in mappings if m["EventSourceArn"] == {"Fn::GetAtt": [source, "Arn"]}]
    assert len(mappings) == 1
    return mappings[0]


def _function(synthesized, *path):
    return synthesized.resources[synthesized.logical_id(*path)]["Properties"]


def test_relay_reads_only_job_inserts_from_the_jobs_table_stream(synthesized):
    # Given the relay's event source mapping
    mapping = _mapping_of(synthesized, synthesized.logical_id(OUTBOX, "RelayFunction"))

    # Then it reads the jobs table's stream from the trim horizon, filtered to INSERTs of job items
    assert mapping["EventSourceArn"] == {
        "Fn::GetAtt": [synthesized.logical_id(STORAGE, JOBS_TABLE), "StreamArn"]
    }
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    (criteria,) = mapping["FilterCriteria"]["Filters"]
    assert json.loads(criteria["Pattern"]) == {
        "eventName": ["INSERT"],
        "dynamodb": {"NewImage": {r.TYPE_ATTRIBUTE: {"S": [r.JOB_ITEM_TYPE]}}},
    }


def test_relay_failures_are_bisected_bounded_and_sent_to_its_own_queue(synthesized):
    mapping = _mapping_of(synthesized, synthesized.logical_id(OUTBOX, "RelayFunction"))

    assert mapping["BisectBatchOnFunctionError"] is True
    assert 0 < mapping["MaximumRetryAttempts"] <= 5
    assert 60 <= mapping["MaximumRecordAgeInSeconds"] <= 86_400
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": [synthesized.logical_id(OUTBOX, RELAY_FAILURE_QUEUE), "Arn"]
    }


def test_worker_reports_partial_failures_with_bounded_concurrency(synthesized):
    worker = synthesized.logical_id(WORKER, "WorkerFunction")
    mapping = _mapping_of(synthesized, worker, synthesized.logical_id(OUTBOX, JOBS_QUEUE))

    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == WORKER_BATCH_SIZE
    assert mapping["MaximumBatchingWindowInSeconds"] == WORKER_BATCH_WINDOW_SECONDS
    assert mapping["ScalingConfig"]["MaximumConcurrency"] == StageConfig().worker_max_concurrency


def test_the_worker_reads_exactly_the_jobs_queue_and_the_isolation_queue(synthesized):
    worker = synthesized.logical_id(WORKER, "WorkerFunction")

    sources = [m["EventSourceArn"]["Fn::GetAtt"][0] for m in _mappings_of(synthesized, worker)]

    assert sorted(sources) == sorted(
        [synthesized.logical_id(OUTBOX, JOBS_QUEUE), synthesized.logical_id(OUTBOX, ISOLATION_QUEUE)]
    )


def test_the_isolation_queue_hands_the_worker_one_job_per_invocation(synthesized):
    """Crash isolation (DESIGN.md, "Lifecycle"): a batch of one, so a crash is its job's own."""
    worker = synthesized.logical_id(WORKER, "WorkerFunction")
    mapping = _mapping_of(synthesized, worker, synthesized.logical_id(OUTBOX, ISOLATION_QUEUE))

    assert mapping["BatchSize"] == 1
    assert "MaximumBatchingWindowInSeconds" not in mapping
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["ScalingConfig"]["MaximumConcurrency"] == StageConfig().isolation_max_concurrency


def test_the_isolation_queue_has_its_own_dlq_and_the_same_redrive_and_visibility(synthesized):
    jobs = synthesized.resources[synthesized.logical_id(OUTBOX, JOBS_QUEUE)]["Properties"]
    isolation = synthesized.resources[synthesized.logical_id(OUTBOX, ISOLATION_QUEUE)]["Properties"]

    assert isolation["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [synthesized.logical_id(OUTBOX, ISOLATION_DLQ), "Arn"]},
        "maxReceiveCount": jobs["RedrivePolicy"]["maxReceiveCount"],
    }
    assert isolation["VisibilityTimeout"] == jobs["VisibilityTimeout"]


def test_jobs_queue_redrives_after_max_attempts_plus_three(synthesized):
    queue = synthesized.resources[synthesized.logical_id(OUTBOX, JOBS_QUEUE)]["Properties"]
    max_attempts = int(
        _function(synthesized, WORKER, "WorkerFunction")["Environment"]["Variables"]["MAX_ATTEMPTS"]
    )

    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [synthesized.logical_id(OUTBOX, JOBS_DLQ), "Arn"]},
        "maxReceiveCount": max_attempts + 3,
    }


def test_jobs_queue_visibility_is_six_worker_timeouts_plus_the_window(synthesized):
    queue = synthesized.resources[synthesized.logical_id(OUTBOX, JOBS_QUEUE)]["Properties"]
    worker_timeout = _function(synthesized, WORKER, "WorkerFunction")["Timeout"]

    assert queue["VisibilityTimeout"] >= 6 * worker_timeout
    assert queue["VisibilityTimeout"] == 6 * worker_timeout + WORKER_BATCH_WINDOW_SECONDS


def test_batch_queue_visibility_is_six_batcher_timeouts_plus_the_window(synthesized):
    # A batcher that died gives its calls back this long after their delivery (batcherTimeoutSeconds)
    queue = synthesized.resources[synthesized.logical_id(BATCH, BATCH_QUEUE)]["Properties"]
    batcher = _function(synthesized, BATCH, "BatcherFunction")
    config = StageConfig.model_validate({})

    assert batcher["Timeout"] == config.batcher_timeout_seconds == 300
    assert queue["VisibilityTimeout"] == 6 * batcher["Timeout"] + config.batch_window_seconds


def test_dlq_keeps_messages_fourteen_days(synthesized):
    dlq = synthesized.resources[synthesized.logical_id(OUTBOX, JOBS_DLQ)]["Properties"]

    assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_sweeper_runs_on_a_schedule_without_retries(synthesized):
    sweeper = synthesized.logical_id(SWEEPER, "SweeperFunction")

    synthesized.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": StageConfig().sweep_schedule,
            "State": "ENABLED",
            "Targets": [
                {
                    "Arn": {"Fn::GetAtt": [sweeper, "Arn"]},
                    "Id": "Target0",
                    "RetryPolicy": {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 300},
                }
            ],
        },
    )
    synthesized.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig", {"FunctionName": {"Ref": sweeper}, "MaximumRetryAttempts": 0}
    )
