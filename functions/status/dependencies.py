"""The composition root of the status function: ports wired to adapters, once per container."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import boto3

from functions.status.settings import StatusSettings
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.dynamodb_output import DynamoOutputEventStore
from shared.adapters.payloads import DynamoS3PayloadStore
from shared.adapters.secrets import CachedSecretSource
from shared.budget_ports import BudgetLedger
from shared.clock import Clock, SystemClock
from shared.cursor import CursorCodec
from shared.lazy import once
from shared.output_ports import OutputEventStore
from shared.ports import JobRepository, PayloadStore, SecretSource


@dataclass(frozen=True)
class StatusDependencies:
    """Everything the status, result, list and cancel use cases talk to."""

    settings: StatusSettings
    repository: JobRepository
    payloads: PayloadStore
    clock: Clock
    cursor_codec: Callable[[], CursorCodec]
    budgets: BudgetLedger
    events: OutputEventStore  # streaming jobs' output (GET /v1/jobs/{id}/output)


def _secrets_source(settings: StatusSettings) -> SecretSource:
    # Imported here: only the list route needs a secret, and the provider costs cold-start time.
    from aws_lambda_powertools.utilities.parameters import SecretsProvider  # noqa: PLC0415

    return CachedSecretSource(
        SecretsProvider(boto3_client=boto3.client("secretsmanager")), settings.secret_max_age_seconds
    )


@cache
def build_dependencies(settings: StatusSettings) -> StatusDependencies:
    """Create the clients once per container; the S3 client and the secret only when first needed."""
    dynamodb = boto3.client("dynamodb")

    @cache
    def secrets() -> SecretSource:
        return _secrets_source(settings)

    def cursor_codec() -> CursorCodec:
        # Read through the cache on every call, so a rotated secret takes effect within max age.
        return CursorCodec(secrets().get(settings.cursor_secret).encode("utf-8"))

    return StatusDependencies(
        settings=settings,
        repository=DynamoJobRepository(dynamodb, settings.jobs_table, settings.idempotency_table),
        payloads=DynamoS3PayloadStore(
            dynamodb, once(lambda: boto3.client("s3")), settings.jobs_table, settings.payload_bucket
        ),
        clock=SystemClock(),
        cursor_codec=cursor_codec,
        budgets=DynamoBudgetLedger(dynamodb, settings.budgets_table),
        events=DynamoOutputEventStore(dynamodb, settings.output_events_table),
    )
