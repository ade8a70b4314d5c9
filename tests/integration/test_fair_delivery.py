"""Local mode's queue poller over moto delivers as a fair queue: a quiet tenant's messages jump a
noisy tenant's backlog, and the messages held to look past it are not received twice."""

from __future__ import annotations

import uuid
from typing import Any

import boto3

from outlast.local.event_sources import SqsSource
from shared.adapters.sqs_queue import SqsJobQueue
from shared.ports import JobMessage

REGION = "us-east-1"


def test_a_quiet_tenant_is_served_before_a_noisy_tenants_backlog(moto_endpoint: str) -> None:
    # Given tenant a's backlog of 40 messages, then three of tenant b, on a standard queue
    sqs = boto3.client("sqs", endpoint_url=moto_endpoint, region_name=REGION)
    url = sqs.create_queue(QueueName=f"fair-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    queue = SqsJobQueue(sqs, url)
    queue.send_batch([JobMessage(job_id=f"a{n}", trace_id="t", group="a") for n in range(40)])
    queue.send_batch([JobMessage(job_id=f"b{n}", trace_id="t", group="b") for n in range(3)])
    batches: list[list[str]] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        batches.append([record["attributes"]["MessageGroupId"] for record in event["Records"]])
        return {"batchItemFailures": []}

    source = SqsSource(
        sqs=sqs, queue_url=url, queue_arn="arn:aws:sqs:us-east-1:123456789012:fair", invoke=invoke
    )

    # When the poller delivers two batches of ten
    source.poll(idle_sleep=0)
    source.poll(idle_sleep=0)

    # Then the first batch is a's (nobody was noisy yet), and the second starts with all of b's:
    # a took every second of the consumers' time since, so it is noisy and waits behind b
    assert batches[0] == ["a"] * 10
    assert batches[1][:3] == ["b", "b", "b"]
    # And every message was received once: the look-ahead held a's, it did not receive them again
    source.poll(idle_sleep=0)
    while source.poll(idle_sleep=0):
        pass
    delivered = [group for batch in batches for group in batch]
    assert sorted(delivered) == ["a"] * 40 + ["b"] * 3
