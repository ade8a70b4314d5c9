"""The composition root of the sweeper."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import boto3

from functions.sweeper.settings import SweeperSettings
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.adapters.dynamodb_documents import DynamoDocumentRepository
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.dynamodb_slots import DynamoSlotStore
from shared.adapters.payloads import DynamoS3PayloadStore
from shared.adapters.sqs_queue import SqsJobQueue
from shared.budget_ports import BudgetLedger
from shared.clock import Clock, SystemClock
from shared.documents.ports import DocumentRepository
from shared.lazy import once
from shared.ports import JobQueue, JobRepository, Lane, PayloadStore
from shared.slots import SlotStore


@dataclass(frozen=True)
class SweeperDependencies:
    """The table (through its sparse index), the inputs to expire and the queue to re-send to."""

    settings: SweeperSettings
    repository: JobRepository
    payloads: PayloadStore
    queues: Mapping[Lane, JobQueue]
    clock: Clock
    # Open budget reservations (their sparse index) that nothing settled: functions.sweeper.budgets.
    budgets: BudgetLedger
    # Pinned documents (their sparse index) whose pins no terminal write removed.
    documents: DocumentRepository
    slots: SlotStore  # expired claims' running slots, released by their own token


@cache
def build_dependencies(settings: SweeperSettings) -> SweeperDependencies:
    """Create AWS clients once per container."""
    dynamodb = boto3.client("dynamodb")
    sqs = boto3.client("sqs")
    return SweeperDependencies(
        settings=settings,
        repository=DynamoJobRepository(dynamodb, settings.jobs_table, idempotency_table=""),
        payloads=DynamoS3PayloadStore(
            dynamodb, once(lambda: boto3.client("s3")), settings.jobs_table, settings.payload_bucket
        ),
        queues={
            Lane.SHARED: SqsJobQueue(sqs, settings.jobs_queue_url),
            Lane.ISOLATION: SqsJobQueue(sqs, settings.isolation_queue_url),
        },
        clock=SystemClock(),
        budgets=DynamoBudgetLedger(dynamodb, settings.budgets_table),
        documents=DynamoDocumentRepository(dynamodb, settings.documents_table),
        slots=DynamoSlotStore(dynamodb, settings.slots_table),
    )
