"""Budgets through the whole pipeline: submit reserves, the notifier settles on the stream, the sweeper
repairs what the notifier missed. After every job ends, nothing is reserved and `used` is the sum
of the jobs' usage, whatever happened on the way (retries, cancels, failures that reported usage,
duplicate stream records, a settlement that never came).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from functions.notifier.handler import lambda_handler as notifier_handler
from shared import resources as r
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.budgets import BudgetState, period_of
from shared.realtime import SILENT_WRITES
from tests.support.answers import TERMINAL_STATUSES
from tests.support.aws import REGION, create_connections_table, create_webhooks_queues, create_webhooks_table
from tests.support.faults import fail_once
from tests.support.pipeline import Pipeline

pytestmark = pytest.mark.integration

TENANT = "acme"  # the sample events' custom:tenant
# The notifier's event filter, as the Realtime construct writes it (infra.constructs.realtime).
NOTIFIER_FILTERS = [
    {
        "eventName": ["INSERT", "MODIFY"],
        "dynamodb": {
            "NewImage": {
                r.TYPE_ATTRIBUTE: {"S": [r.JOB_ITEM_TYPE]},
                r.WRITE_KIND_ATTRIBUTE: {"S": [{"anything-but": sorted(SILENT_WRITES)}]},
            }
        },
    }
]
# Paragraphs of about 3 KB with chunks of 1000 tokens: one chunk each (tests/.../test_long_inputs.py).
CHUNK_TOKENS, STEP_OUTPUT_TOKENS = 1000, 100


def _paragraphs(count: int, mark: str = "") -> str:
    paragraphs = [
        " ".join(
            f"Section {n}, sentence {line}: the ledger of the quarter moved as planned." for line in range(40)
        )
        for n in range(count)
    ]
    paragraphs[-1] += f" {mark}"
    return "\n\n".join(paragraphs)


@pytest.fixture
def budget_pipeline(patient_pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    """The pipeline with a stage budget large enough for every job here, and multi-step planning."""
    monkeypatch.setenv("DEFAULT_MONTHLY_TOKENS", "10000000")
    monkeypatch.setenv("CHUNK_TOKENS", str(CHUNK_TOKENS))
    monkeypatch.setenv("STEP_OUTPUT_TOKENS", str(STEP_OUTPUT_TOKENS))
    # The notifier's own resources: no client is connected, so it pushes nothing and only settles.
    monkeypatch.setenv(r.ENV_CONNECTIONS_TABLE, create_connections_table(os.environ["AWS_ENDPOINT_URL"]))
    monkeypatch.setenv(r.ENV_CONNECTIONS_ENDPOINT, "http://127.0.0.1:9/never-called")
    # No webhook endpoint is registered: the notifier enqueues nothing.
    monkeypatch.setenv(r.ENV_WEBHOOKS_TABLE, create_webhooks_table(os.environ["AWS_ENDPOINT_URL"]))
    monkeypatch.setenv(r.ENV_WEBHOOKS_QUEUE_URL, create_webhooks_queues(os.environ["AWS_ENDPOINT_URL"])[0])
    return patient_pipeline


def _ledger(pipeline: Pipeline) -> DynamoBudgetLedger:
    client = boto3.client("dynamodb", endpoint_url=pipeline.endpoint, region_name=REGION)
    return DynamoBudgetLedger(client, pipeline.resources.budgets_table)


def _state(pipeline: Pipeline) -> BudgetState:
    return _ledger(pipeline).state(TENANT, period_of(datetime.now(UTC)))


def _tokens(document: dict[str, Any]) -> int:
    usage = document["usage"]
    return int(usage["inputTokens"] + usage["outputTokens"]) if usage else 0


def _submit_mix(pipeline: Pipeline) -> list[str]:
    """Jobs that succeed, retry, fail after reporting usage, and get canceled."""
    bodies = {
        "plain": "Summarize the incident: the deploy rolled back at 10:09.",
        "retried": "Summarize this. [[fault:rate_limit*2]]",
        "timed-out-once": "Summarize that. [[fault:timeout*1]]",
        "long": _paragraphs(4),
        # Three chunks succeed (their checkpoints carry usage), the fourth is refused: Failed, with usage.
        "failed-with-usage": _paragraphs(4, "[[fault:content_policy]]"),
        "failed-at-once": "Nothing to count. [[fault:content_policy]]",
    }
    job_ids = [
        pipeline.submit({"operation": "summarize", "input": {"text": text}}, key=f"mix-{name}")["body"][
            "jobId"
        ]
        for name, text in bodies.items()
    ]
    canceled = pipeline.submit(
        {"operation": "summarize", "input": {"text": "Never run."}}, key="mix-canceled"
    )
    canceled_id = canceled["body"]["jobId"]
    assert canceled["body"]["reservedTokens"] > 0
    assert pipeline.cancel(canceled_id)["body"]["status"] == "Canceled"
    return [*job_ids, canceled_id]


def _settled(pipeline: Pipeline, job_ids: list[str]) -> bool:
    documents = [pipeline.status(job_id) for job_id in job_ids]
    return all(d["status"] in TERMINAL_STATUSES and d["reservedTokens"] is None for d in documents)


def test_after_every_job_ends_nothing_is_reserved_and_used_is_their_usage(budget_pipeline: Pipeline) -> None:
    pipeline = budget_pipeline
    pipeline.stream_consumer(notifier_handler, NOTIFIER_FILTERS)
    # Given jobs that succeed, retry, fail (some after spending tokens) and get canceled
    job_ids = _submit_mix(pipeline)
    reserved = _state(pipeline).reserved
    assert reserved > 0

    # When they all run to their end, the notifier settling on the stream
    pipeline.pump(lambda: _settled(pipeline, job_ids), timeout_seconds=90)

    # Then nothing is reserved, and used is exactly the sum of the jobs' usage
    documents = {job_id: pipeline.status(job_id) for job_id in job_ids}
    statuses = sorted(d["status"] for d in documents.values())
    assert statuses == ["Canceled", "Failed", "Failed", "Succeeded", "Succeeded", "Succeeded", "Succeeded"]
    spent = sum(_tokens(d) for d in documents.values())
    failed_with_usage = documents[job_ids[4]]
    assert failed_with_usage["status"] == "Failed"
    assert _tokens(failed_with_usage) > 0
    state = _state(pipeline)
    assert (state.used, state.reserved) == (spent, 0)
    assert 0 < spent < reserved  # every reservation was a bound on what its job then used


def test_duplicate_and_retried_stream_records_settle_once(
    budget_pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = budget_pipeline
    # Given a notifier whose first settlement fails (the record is retried)
    failures = fail_once(monkeypatch, DynamoBudgetLedger, "settle")
    pipeline.stream_consumer(notifier_handler, NOTIFIER_FILTERS)
    job_ids = [
        pipeline.submit({"operation": "summarize", "input": {"text": f"Report {n}."}}, key=f"dup-{n}")[
            "body"
        ]["jobId"]
        for n in range(3)
    ]
    pipeline.pump(lambda: _settled(pipeline, job_ids))
    assert failures  # the fault was hit, and the retry settled
    state = _state(pipeline)
    spent = sum(_tokens(pipeline.status(job_id)) for job_id in job_ids)
    assert (state.used, state.reserved) == (spent, 0)

    # When a second notifier replays the whole stream from its start (every record delivered again)
    replay = pipeline.stream_consumer(notifier_handler, NOTIFIER_FILTERS)
    assert replay.poll() > 0

    # Then nothing changes
    assert _state(pipeline) == state


def test_a_settlement_lost_after_the_terminal_write_is_repaired_by_the_sweeper(
    budget_pipeline: Pipeline,
) -> None:
    pipeline = budget_pipeline
    # Given jobs that end while no notifier reads the stream (its records lost, or its retries spent)
    job_ids = _submit_mix(pipeline)
    pipeline.pump(lambda: all(pipeline.status(j)["status"] in TERMINAL_STATUSES for j in job_ids), 90)
    assert _state(pipeline).reserved > 0
    assert all(pipeline.status(job_id)["reservedTokens"] for job_id in job_ids)  # ended, unsettled

    # When the sweeper runs past the reservations' grace
    pipeline.pump(lambda: _state(pipeline).reserved == 0, timeout_seconds=30, sweep=True)

    # Then every run is settled with its job's usage
    spent = sum(_tokens(pipeline.status(job_id)) for job_id in job_ids)
    settled = _state(pipeline)
    assert settled.used == spent
    assert _settled(pipeline, job_ids)

    # ... and when the notifier's records finally arrive, they change nothing
    late = pipeline.stream_consumer(notifier_handler, NOTIFIER_FILTERS)
    assert late.poll() > 0
    assert _state(pipeline) == settled
