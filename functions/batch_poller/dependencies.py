"""The composition root of the batch poller."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache

import boto3

from functions.batch_poller.settings import BatchPollerSettings
from shared.adapters.dynamodb_batches import DynamoOpenBatchStore
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.json_schema import JsonSchemaValidator
from shared.adapters.openai_batch_client import batch_api_on_first_use
from shared.adapters.payloads import DynamoS3PayloadStore
from shared.adapters.sqs_queue import SqsJobQueue
from shared.adapters.step_checkpoints import DynamoStepStore
from shared.batch_ports import BatchApi, OpenBatchStore
from shared.budget_ports import BudgetLedger
from shared.clock import Clock, SystemClock
from shared.extraction.answers import SchemaValidator
from shared.lazy import once
from shared.ports import JobQueue, JobRepository, Lane, PayloadStore, StepStore


@dataclass(frozen=True)
class BatchPollerDependencies:
    """Everything the poller reads and writes."""

    settings: BatchPollerSettings
    repository: JobRepository
    payloads: PayloadStore  # a one-step job's answer is its result
    steps: StepStore  # a step's answer is its checkpoint
    queues: Mapping[Lane, JobQueue]  # a job handed back is dispatched again
    batches: OpenBatchStore
    api: Callable[[], BatchApi]
    validator: SchemaValidator  # extract's answers are checked before they are kept
    budgets: BudgetLedger  # late usage (discarded answers, billed all the same) comes in once
    clock: Clock


@cache
def build_dependencies(settings: BatchPollerSettings) -> BatchPollerDependencies:
    """Create AWS clients once per container; S3's and the provider's when first needed."""
    dynamodb = boto3.client("dynamodb")
    sqs = boto3.client("sqs")
    return BatchPollerDependencies(
        settings=settings,
        repository=DynamoJobRepository(dynamodb, settings.jobs_table, idempotency_table=""),
        payloads=DynamoS3PayloadStore(
            dynamodb, once(lambda: boto3.client("s3")), settings.jobs_table, settings.payload_bucket
        ),
        steps=DynamoStepStore(dynamodb, settings.jobs_table),
        queues={
            Lane.SHARED: SqsJobQueue(sqs, settings.jobs_queue_url),
            Lane.ISOLATION: SqsJobQueue(sqs, settings.isolation_queue_url),
        },
        batches=DynamoOpenBatchStore(dynamodb, settings.batches_table),
        api=batch_api_on_first_use(settings, once(lambda: boto3.client("secretsmanager"))),
        validator=JsonSchemaValidator(),
        budgets=DynamoBudgetLedger(dynamodb, settings.budgets_table),
        clock=SystemClock(),
    )
