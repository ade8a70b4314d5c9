"""The composition root of the submit function: ports wired to adapters, once per container."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import boto3

from functions.submit.settings import SubmitSettings
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.payloads import DynamoS3PayloadStore
from shared.budget_ports import BudgetLedger
from shared.clock import Clock, SystemClock
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


@cache
def build_dependencies(settings: SubmitSettings) -> SubmitDependencies:
    """Create the clients once per container; warm invocations reuse them."""
    dynamodb = boto3.client("dynamodb")
    return SubmitDependencies(
        settings=settings,
        repository=DynamoJobRepository(dynamodb, settings.jobs_table, settings.idempotency_table),
        payloads=DynamoS3PayloadStore(
            dynamodb, once(lambda: boto3.client("s3")), settings.jobs_table, settings.payload_bucket
        ),
        clock=SystemClock(),
        budgets=DynamoBudgetLedger(dynamodb, settings.budgets_table),
    )
