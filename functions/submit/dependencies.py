"""The composition root of the submit function: ports wired to adapters, once per container."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import boto3

from functions.submit.settings import SubmitSettings
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.adapters.dynamodb_documents import DynamoDocumentRepository
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.payloads import DynamoS3PayloadStore
from shared.adapters.s3_documents import S3DocumentObjects
from shared.budget_ports import BudgetLedger
from shared.clock import Clock, SystemClock
from shared.documents.ports import DocumentObjects, DocumentRepository
from shared.lazy import once
from shared.ports import JobRepository, PayloadStore


@dataclass(frozen=True)
class SubmitDependencies:
    """Everything the submit use case talks to."""

    settings: SubmitSettings
    repository: JobRepository
    payloads: PayloadStore
    clock: Clock
    budgets: BudgetLedger
    documents: DocumentRepository
    document_objects: DocumentObjects


@cache
def build_dependencies(settings: SubmitSettings) -> SubmitDependencies:
    """Create the clients once per container; warm invocations reuse them."""
    dynamodb = boto3.client("dynamodb")
    s3 = once(lambda: boto3.client("s3"))
    return SubmitDependencies(
        settings=settings,
        repository=DynamoJobRepository(dynamodb, settings.jobs_table, settings.idempotency_table),
        payloads=DynamoS3PayloadStore(dynamodb, s3, settings.jobs_table, settings.payload_bucket),
        clock=SystemClock(),
        budgets=DynamoBudgetLedger(dynamodb, settings.budgets_table),
        documents=DynamoDocumentRepository(dynamodb, settings.documents_table),
        document_objects=S3DocumentObjects(s3, settings.documents_bucket),
    )
