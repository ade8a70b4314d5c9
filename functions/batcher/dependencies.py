"""The composition root of the batcher."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import boto3

from functions.batcher.settings import BatcherSettings
from shared.adapters.dynamodb_batches import DynamoOpenBatchStore
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.openai_batch_client import batch_api_on_first_use
from shared.batch_ports import BatchApi, OpenBatchStore
from shared.clock import Clock, SystemClock
from shared.lazy import once
from shared.ports import JobRepository


@dataclass(frozen=True)
class BatcherDependencies:
    """The jobs (to check each call's hold and record its batch), the open batches, the provider."""

    repository: JobRepository
    batches: OpenBatchStore
    api: Callable[[], BatchApi]
    clock: Clock


@cache
def build_dependencies(settings: BatcherSettings) -> BatcherDependencies:
    """Create AWS clients once per container; the provider's when a batch first needs it."""
    dynamodb = boto3.client("dynamodb")
    return BatcherDependencies(
        repository=DynamoJobRepository(dynamodb, settings.jobs_table, idempotency_table=""),
        batches=DynamoOpenBatchStore(dynamodb, settings.batches_table),
        api=batch_api_on_first_use(settings, once(lambda: boto3.client("secretsmanager"))),
        clock=SystemClock(),
    )
