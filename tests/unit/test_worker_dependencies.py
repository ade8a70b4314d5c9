"""The worker's composition root: the SQS client made when a queue is first used, the model
provider once, whichever job asks first."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from functions.worker.dependencies import QueuesOnFirstUse, build_dependencies
from functions.worker.settings import WorkerSettings
from shared import resources as r
from shared.adapters.sqs_queue import SqsJobQueue
from shared.ports import JobMessage, Lane

SETTINGS = WorkerSettings.model_validate(
    {
        r.ENV_JOBS_TABLE: "jobs",
        r.ENV_PAYLOAD_BUCKET: "payloads",
        r.ENV_JOBS_QUEUE_URL: "https://sqs.example/jobs",
        r.ENV_DLQ_URL: "https://sqs.example/dlq",
        r.ENV_ISOLATION_QUEUE_URL: "https://sqs.example/isolation",
        r.ENV_ISOLATION_QUEUE_ARN: "arn:aws:sqs:us-east-1:123456789012:isolation",
        r.ENV_ISOLATION_DLQ_URL: "https://sqs.example/isolation-dlq",
        r.ENV_OPENAI_SECRET: "secret",
        r.ENV_OUTPUT_EVENTS_TABLE: "output-events",
        r.ENV_SLOTS_TABLE: "slots",
    }
)


class RecordingSqs:
    """Stands in for the SQS client: records the calls the queues make."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def send_message(self, **arguments: Any) -> None:
        self.calls.append(("send_message", arguments))


class ClientFactory:
    """Counts how often the client is made."""

    def __init__(self) -> None:
        self.made = 0
        self.client = RecordingSqs()

    def __call__(self) -> Any:
        self.made += 1
        return self.client


def test_no_client_is_made_until_a_queue_is_used() -> None:
    # Given the worker's queues at cold start
    factory = ClientFactory()
    queues = QueuesOnFirstUse(SETTINGS, factory)

    # When the mapping is only looked at (its lanes, its size)
    lanes = list(queues)

    # Then no SQS client exists yet
    assert lanes == [Lane.SHARED, Lane.ISOLATION]
    assert len(queues) == 2
    assert factory.made == 0


def test_the_first_use_makes_one_client_for_both_lanes() -> None:
    # Given the worker's queues
    factory = ClientFactory()
    queues = QueuesOnFirstUse(SETTINGS, factory)

    # When a retry sends a fresh delayed message on each lane
    queues[Lane.SHARED].send(JobMessage(job_id="j1", trace_id="t1", group="acme"), 30)
    queues[Lane.ISOLATION].send(JobMessage(job_id="j2", trace_id="t2", group="acme"), 60)

    # Then one client was made, and each lane's queue talks to its own URL through it
    assert factory.made == 1
    assert [(name, args["QueueUrl"], args["DelaySeconds"]) for name, args in factory.client.calls] == [
        ("send_message", "https://sqs.example/jobs", 30),
        ("send_message", "https://sqs.example/isolation", 60),
    ]
    assert isinstance(queues[Lane.SHARED], SqsJobQueue)
    assert queues[Lane.SHARED] is queues[Lane.SHARED]


def test_a_batchs_first_jobs_share_one_provider() -> None:
    # Given the worker's dependencies at cold start (no client made beyond DynamoDB's)
    deps = build_dependencies(SETTINGS.model_copy(update={"secret_max_age_seconds": 7}))
    start = threading.Barrier(10)

    def first_call() -> object:
        start.wait()
        return deps.provider()

    # When ten jobs of the first batch ask for the model provider at the same moment, on pool threads
    with ThreadPoolExecutor(max_workers=10) as pool:
        providers = list(pool.map(lambda _: first_call(), range(10)))

    # Then one provider was built (one secrets client, one OpenAI client), not one per job
    assert len({id(provider) for provider in providers}) == 1
    assert deps.provider() is providers[0]
