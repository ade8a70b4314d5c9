"""The composition root of the worker: ports wired to adapters, once per container."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import boto3

from functions.worker.settings import WorkerSettings
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.dynamodb_output import DynamoOutputEventStore
from shared.adapters.dynamodb_slots import DynamoSlotStore
from shared.adapters.json_schema import JsonSchemaValidator
from shared.adapters.payloads import DynamoS3PayloadStore
from shared.adapters.secrets import CachedSecretSource
from shared.adapters.sqs_batch_calls import SqsBatchCallQueue
from shared.adapters.sqs_queue import SqsJobQueue
from shared.adapters.step_checkpoints import DynamoStepStore
from shared.batch_ports import BatchCallQueue
from shared.batches import BatchCall
from shared.clock import Clock, SystemClock
from shared.extraction.answers import SchemaValidator
from shared.lazy import CLIENT_LOCK, once
from shared.output_ports import OutputEventStore
from shared.ports import JobQueue, JobRepository, Lane, ModelProvider, PayloadStore, StepStore
from shared.slots import SlotStore

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

# Two pools, so that AWS requests (heartbeats above all) never queue behind model calls. A model
# call abandoned by a cancel, a lost lease or a release keeps its thread until the SDK's timeout,
# also into the container's next invocations; queued behind such calls, heartbeats would be late
# and leases would lapse. Each pool holds a batch of 10 several times over.
_AWS_THREADS = 16
_MODEL_THREADS = 32
_PROVIDER_LOCK = threading.Lock()  # held while the provider is built (which makes a client too)


@dataclass(frozen=True)
class WorkerDependencies:
    """Everything the worker talks to, plus the thread pools its blocking calls run on."""

    settings: WorkerSettings
    repository: JobRepository
    slots: SlotStore  # capped tenants' running slots (shared.slots)
    payloads: PayloadStore
    steps: StepStore  # a multi-step job's checkpoints
    events: OutputEventStore  # a streaming call's output events
    queues: Mapping[Lane, JobQueue]  # each with its own DLQ, for poison from that queue
    clock: Clock
    provider: Callable[[], ModelProvider]
    validator: SchemaValidator  # extract's answers (its library is imported by the first one)
    executor: ThreadPoolExecutor  # AWS requests
    model_executor: ThreadPoolExecutor  # model calls
    random: Callable[[], float]
    batch_calls: BatchCallQueue  # a batch job's ready calls go to the batcher


@cache
def build_dependencies(settings: WorkerSettings) -> WorkerDependencies:
    """Create the DynamoDB client once per container; S3, SQS and the model client when first needed."""
    dynamodb = boto3.client("dynamodb")

    def build_provider() -> ModelProvider:
        # Built on first use: the secrets client and the provider module cost cold-start time.
        from aws_lambda_powertools.utilities.parameters import SecretsProvider  # noqa: PLC0415

        from functions.worker.provider import OpenAIChatProvider, build_openai_client  # noqa: PLC0415

        with CLIENT_LOCK:
            client = boto3.client("secretsmanager")
        secrets = CachedSecretSource(SecretsProvider(boto3_client=client), settings.secret_max_age_seconds)
        return OpenAIChatProvider(
            lambda: secrets.get(settings.openai_secret),
            lambda key: build_openai_client(key, settings.openai_base_url, settings.provider_timeout_seconds),
            settings.flex_timeout_seconds,
        )

    return WorkerDependencies(
        settings=settings,
        repository=DynamoJobRepository(dynamodb, settings.jobs_table, idempotency_table=""),
        slots=DynamoSlotStore(dynamodb, settings.slots_table),
        payloads=DynamoS3PayloadStore(
            dynamodb, once(lambda: boto3.client("s3")), settings.jobs_table, settings.payload_bucket
        ),
        steps=DynamoStepStore(dynamodb, settings.jobs_table),
        events=DynamoOutputEventStore(dynamodb, settings.output_events_table),
        queues=QueuesOnFirstUse(settings, once(lambda: boto3.client("sqs"))),
        clock=SystemClock(),
        # Once, whichever job asks first: a batch's first jobs ask at the same time, on pool threads.
        provider=once(build_provider, _PROVIDER_LOCK),
        validator=JsonSchemaValidator(),
        executor=ThreadPoolExecutor(max_workers=_AWS_THREADS, thread_name_prefix="worker-aws"),
        model_executor=ThreadPoolExecutor(max_workers=_MODEL_THREADS, thread_name_prefix="worker-model"),
        random=random.random,
        batch_calls=_BatcherOnFirstUse(settings, once(lambda: boto3.client("sqs"))),
    )


class _BatcherOnFirstUse:
    """The batcher's queue, its client made when a batch job first needs it."""

    def __init__(self, settings: WorkerSettings, sqs: Callable[[], SQSClient]) -> None:
        self._url = settings.batch_queue_url
        self._sqs = sqs

    def send(self, calls: list[BatchCall]) -> None:
        if self._url is None:
            raise RuntimeError("this stage has no batcher (BATCH_QUEUE_URL is unset)")
        SqsBatchCallQueue(self._sqs(), self._url).send(calls)


class QueuesOnFirstUse(Mapping[Lane, JobQueue]):
    """Both lanes' queues, whose SQS client is made when a queue is first used, not at cold start.

    A job that succeeds never calls SQS (Lambda deletes the message of a record the batch
    response does not name): only retries, early deliveries, releases and poison do, so most
    containers never pay for the client.
    """

    def __init__(self, settings: WorkerSettings, sqs: Callable[[], SQSClient]) -> None:
        self._settings = settings
        self._sqs = sqs
        self._queues: dict[Lane, JobQueue] | None = None

    def _built(self) -> dict[Lane, JobQueue]:
        if self._queues is None:
            self._queues = _queues(self._sqs(), self._settings)
        return self._queues

    def __getitem__(self, lane: Lane) -> JobQueue:
        return self._built()[lane]

    def __iter__(self) -> Iterator[Lane]:
        return iter(Lane)

    def __len__(self) -> int:
        return len(Lane)


def _queues(sqs: SQSClient, settings: WorkerSettings) -> dict[Lane, JobQueue]:
    return {
        Lane.SHARED: SqsJobQueue(sqs, settings.jobs_queue_url, settings.dlq_url),
        Lane.ISOLATION: SqsJobQueue(sqs, settings.isolation_queue_url, settings.isolation_dlq_url),
    }
