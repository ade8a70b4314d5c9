"""The composition root of the ingest: ports wired to adapters, once per container."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import boto3

from functions.ingest.sandbox import CHILD_MODULE, ChildProcessExtraction, Confinement
from functions.ingest.settings import IngestSettings
from shared.adapters.dynamodb_documents import DynamoDocumentRepository
from shared.adapters.s3_documents import S3DocumentObjects
from shared.adapters.sqs_dead_letters import SqsDeadLetterQueue
from shared.clock import Clock, SystemClock
from shared.documents.extraction import ExtractionLimits
from shared.documents.ports import DeadLetterQueue, DocumentObjects, DocumentRepository, TextExtraction
from shared.lazy import once

_MB = 1024 * 1024


@dataclass(frozen=True)
class IngestDependencies:
    """Everything the ingest talks to."""

    settings: IngestSettings
    repository: DocumentRepository
    objects: DocumentObjects
    extraction: TextExtraction
    dead_letters: DeadLetterQueue
    clock: Clock


@cache
def build_dependencies(settings: IngestSettings) -> IngestDependencies:
    """Create the DynamoDB client once per container; S3 and SQS when first needed (a test
    event needs neither, and only poison needs SQS)."""
    limits = ExtractionLimits(
        max_extracted_bytes=settings.max_extracted_bytes, max_pages=settings.max_document_pages
    )
    confinement = Confinement(
        memory_bytes=settings.extraction_memory_mb * _MB,
        cpu_seconds=settings.extraction_cpu_seconds,
    )
    return IngestDependencies(
        settings=settings,
        repository=DynamoDocumentRepository(boto3.client("dynamodb"), settings.documents_table),
        objects=S3DocumentObjects(once(lambda: boto3.client("s3")), settings.documents_bucket),
        extraction=ChildProcessExtraction(limits, confinement, child_module=CHILD_MODULE),
        dead_letters=SqsDeadLetterQueue(once(lambda: boto3.client("sqs")), settings.dlq_url),
        clock=SystemClock(),
    )
