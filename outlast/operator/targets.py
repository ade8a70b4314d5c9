"""Which outlast an operator command acts on: a running local stack, or a deployed CloudFormation stack.

`--local [--port P]` reads the local stack's state file (`.local/stack-<port>.json`); otherwise
`--stack-name NAME` (default `outlast`) reads the stack's outputs with DescribeStacks, using the
operator's own AWS credentials (`--profile`, `--region`, or the usual environment). The stage's
settings a command needs (dispatchGraceSeconds, maxCrashes) are outputs too, so an operator never
restates them (and cannot get them wrong).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from types import SimpleNamespace
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from infra.names import (
    BATCH,
    BATCHES_TABLE,
    BUDGETS,
    BUDGETS_TABLE,
    ISOLATION_DLQ,
    ISOLATION_QUEUE,
    JOBS_DLQ,
    JOBS_QUEUE,
    JOBS_TABLE,
    OUTBOX,
    PAYLOAD_BUCKET,
    STORAGE,
    WEBHOOKS,
    WEBHOOKS_DLQ,
    WEBHOOKS_QUEUE,
    WEBHOOKS_TABLE,
    Output,
)
from outlast.operator.budgets import OperatorBudgets
from outlast.operator.tenants import OperatorTenants
from shared.adapters.dynamo_errors import error_code
from shared.adapters.dynamodb_batches import DynamoOpenBatchStore
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.dynamodb_tenants import DynamoTenantSettings
from shared.adapters.dynamodb_webhooks import DynamoEndpointStore
from shared.adapters.payloads import DynamoS3PayloadStore
from shared.adapters.sqs_queue import SqsJobQueue
from shared.adapters.step_checkpoints import DynamoStepStore
from shared.ports import JobQueue, Lane

DEFAULT_STACK_NAME = "outlast"

ClientFactory = Callable[[str], Any]

# `--queue`: which of the two job queues (and so which DLQ) a command reads.
QUEUE_CHOICES: dict[str, Lane] = {"jobs": Lane.SHARED, "isolation": Lane.ISOLATION}


class TargetError(Exception):
    """The target cannot be resolved (no local stack, no such stack, an output missing)."""


@dataclass(frozen=True)
class Resources:
    """The physical names the operator commands need."""

    jobs_table: str
    jobs_queue_url: str
    dlq_url: str
    isolation_queue_url: str
    isolation_dlq_url: str
    payload_bucket: str
    # Webhooks (None on a stack deployed before them: the webhooks commands say so).
    webhooks_table: str | None = None
    webhooks_queue_url: str | None = None
    webhooks_dlq_url: str | None = None
    # Token budgets; None for a stack deployed before them (its jobs reserve nothing).
    budgets_table: str | None = None
    default_monthly_tokens: int = 0
    # Fairness: the stage's running cap for tenants without their own (0: no cap).
    max_running_per_tenant: int = 0
    # Open provider batches (the batch tier); None for a stack deployed before it.
    batches_table: str | None = None
    # The stage's settings (outputs); None on a stack deployed before they were published.
    dispatch_grace_seconds: int | None = None
    max_crashes: int | None = None

    def queue_url(self, lane: Lane) -> str:
        """The queue a lane's jobs are sent to."""
        return self.isolation_queue_url if lane is Lane.ISOLATION else self.jobs_queue_url

    def dlq_url_of(self, lane: Lane) -> str:
        """That queue's dead-letter queue."""
        return self.isolation_dlq_url if lane is Lane.ISOLATION else self.dlq_url


@dataclass(frozen=True)
class StageSettings:
    """The stage's settings an operator command acts by, as the stack was deployed with them."""

    dispatch_grace_seconds: int  # when the sweeper re-sends a dispatched job whose message was lost
    max_crashes: int  # solo claims that crashed a worker before the sweeper fails the job


class Target:
    """One outlast installation: its resources and clients for them (made on first use)."""

    def __init__(
        self,
        label: str,
        resources: Resources,
        clients: ClientFactory,
        receive_wait_seconds: int,
        *,
        local: bool = False,
    ) -> None:
        self.label = label
        # The local stack: webhook receivers on loopback over plain http are allowed there only.
        self.local = local
        self.resources = resources
        self._clients = clients
        # AWS: a 1 s long poll, so an empty answer means an empty queue (a short poll samples only
        # some SQS servers). moto serves one request at a time: never long-poll it.
        self.receive_wait_seconds = receive_wait_seconds

    def settings(self) -> StageSettings:
        """The stage's settings, from the stack (TargetError on a stack that does not publish them)."""
        grace, crashes = self.resources.dispatch_grace_seconds, self.resources.max_crashes
        if grace is None or crashes is None:
            raise TargetError(
                f"the {self.label} does not publish {Output.DISPATCH_GRACE_SECONDS} and "
                f"{Output.MAX_CRASHES}: redeploy it with this version"
            )
        return StageSettings(dispatch_grace_seconds=grace, max_crashes=crashes)

    @cached_property
    def dynamodb(self) -> Any:
        """The DynamoDB client."""
        return self._clients("dynamodb")

    @cached_property
    def sqs(self) -> Any:
        """The SQS client."""
        return self._clients("sqs")

    @cached_property
    def repository(self) -> DynamoJobRepository:
        """The jobs table, through the functions' own adapter (the idempotency table is not needed)."""
        return DynamoJobRepository(self.dynamodb, self.resources.jobs_table, idempotency_table="")

    @cached_property
    def steps(self) -> DynamoStepStore:
        """A multi-step job's checkpoints, through the worker's own adapter."""
        return DynamoStepStore(self.dynamodb, self.resources.jobs_table)

    @cached_property
    def payloads(self) -> DynamoS3PayloadStore:
        """Inputs and results, through the functions' own adapter."""
        return DynamoS3PayloadStore(
            self.dynamodb,
            lambda: self._clients("s3"),
            self.resources.jobs_table,
            self.resources.payload_bucket,
        )

    @cached_property
    def webhooks(self) -> DynamoEndpointStore:
        """The webhooks table (endpoints, secrets, deliveries), through the functions' own adapter."""
        return DynamoEndpointStore(self.dynamodb, self.webhook_resources()[0])

    def webhook_resources(self) -> tuple[str, str, str]:
        """The webhooks table, queue URL and DLQ URL; TargetError on a stack without webhooks."""
        found = (
            self.resources.webhooks_table,
            self.resources.webhooks_queue_url,
            self.resources.webhooks_dlq_url,
        )
        if found[0] is None or found[1] is None or found[2] is None:
            raise TargetError(f"the {self.label} has no webhooks (deployed before them? redeploy it)")
        return found[0], found[1], found[2]

    @cached_property
    def budgets(self) -> OperatorBudgets | None:
        """Token budgets through the functions' own ledger adapter (None: the stack has none)."""
        if self.resources.budgets_table is None:
            return None
        return OperatorBudgets(
            DynamoBudgetLedger(self.dynamodb, self.resources.budgets_table),
            self.payloads,
            self.resources.default_monthly_tokens,
        )

    @cached_property
    def tenants(self) -> OperatorTenants | None:
        """Tenants' running caps, beside their budgets (None: the stack has no budgets table)."""
        if self.resources.budgets_table is None:
            return None
        return OperatorTenants(
            DynamoTenantSettings(self.dynamodb, self.resources.budgets_table),
            self.resources.max_running_per_tenant,
        )

    @cached_property
    def batches(self) -> DynamoOpenBatchStore:
        """The open provider batches, through the poller's own adapter (TargetError: none here)."""
        if self.resources.batches_table is None:
            raise TargetError(f"the {self.label} has no batch tier (deployed before it? redeploy it)")
        return DynamoOpenBatchStore(self.dynamodb, self.resources.batches_table)

    @cached_property
    def queues(self) -> dict[Lane, JobQueue]:
        """The jobs queue and the isolation queue (each with its DLQ), by lane, through the
        functions' own adapter: a job is sent to the queue of `Lane.of(job)`, as the sweeper does."""
        return {
            lane: SqsJobQueue(self.sqs, self.resources.queue_url(lane), self.resources.dlq_url_of(lane))
            for lane in Lane
        }


def resolve(arguments: SimpleNamespace) -> Target:
    """The target the command line names."""
    if arguments.local:
        if arguments.stack_name or arguments.region or arguments.profile:
            raise TargetError("--local acts on the local stack: drop --stack-name, --region and --profile")
        return local_target(arguments.port)
    name = arguments.stack_name or DEFAULT_STACK_NAME
    return stack_target(name, region=arguments.region, profile=arguments.profile)


def local_target(port: int) -> Target:
    """The local stack on `port`, with moto's dummy credentials (never the operator's)."""
    from outlast.local.access import local_client  # noqa: PLC0415 - local mode only when asked for
    from outlast.local.stack import read_state  # noqa: PLC0415

    try:
        state = read_state(port)
    except FileNotFoundError as error:
        raise TargetError(str(error)) from None
    resources = Resources(
        jobs_table=_by_logical_id(state["tables"], STORAGE + JOBS_TABLE),
        jobs_queue_url=_by_logical_id(state["queues"], OUTBOX + JOBS_QUEUE),
        dlq_url=_by_logical_id(state["queues"], OUTBOX + JOBS_DLQ),
        isolation_queue_url=_by_logical_id(state["queues"], OUTBOX + ISOLATION_QUEUE),
        isolation_dlq_url=_by_logical_id(state["queues"], OUTBOX + ISOLATION_DLQ),
        payload_bucket=_by_logical_id(state["buckets"], STORAGE + PAYLOAD_BUCKET),
        webhooks_table=_optional(state["tables"], WEBHOOKS + WEBHOOKS_TABLE),
        webhooks_queue_url=_optional(state["queues"], WEBHOOKS + WEBHOOKS_QUEUE),
        webhooks_dlq_url=_optional(state["queues"], WEBHOOKS + WEBHOOKS_DLQ),
        budgets_table=_optional(state["tables"], BUDGETS + BUDGETS_TABLE),
        batches_table=_optional(state["tables"], BATCH + BATCHES_TABLE),
        default_monthly_tokens=int(state.get("outputs", {}).get(Output.DEFAULT_MONTHLY_TOKENS, 0)),
        max_running_per_tenant=int(state.get("outputs", {}).get(Output.MAX_RUNNING_PER_TENANT, 0)),
        **_stage_settings(state.get("outputs", {})),
    )
    return Target(
        f"local stack on port {port}", resources, lambda service: local_client(service, state), 0, local=True
    )


def _stage_settings(outputs: Mapping[str, Any]) -> dict[str, int | None]:
    def number(key: Output) -> int | None:
        value = outputs.get(key)
        return None if value is None else int(value)

    return {
        "dispatch_grace_seconds": number(Output.DISPATCH_GRACE_SECONDS),
        "max_crashes": number(Output.MAX_CRASHES),
    }


def _by_logical_id(names: Mapping[str, str], prefix: str) -> str:
    # CDK logical ids are the construct path plus a hash: `OutboxJobsDlqF3C0B954`.
    found = [name for logical_id, name in names.items() if logical_id.startswith(prefix)]
    if len(found) != 1:
        raise TargetError(f"the local stack's state has no single resource named {prefix}*")
    return found[0]


def _optional(names: Mapping[str, str], prefix: str) -> str | None:
    # A stack without webhooks serves every other command; the webhooks commands say what is missing.
    return _by_logical_id(names, prefix) if any(lid.startswith(prefix) for lid in names) else None


def stack_target(stack_name: str, *, region: str | None, profile: str | None) -> Target:
    """A deployed stack, from its outputs, with the operator's AWS credentials."""
    try:
        session = boto3.Session(profile_name=profile, region_name=region)
        outputs = _stack_outputs(session.client("cloudformation"), stack_name)
    except ClientError as error:
        if error_code(error) == "ValidationError":  # DescribeStacks' answer for a missing stack
            raise TargetError(f"no CloudFormation stack named {stack_name!r} here") from None
        raise
    except BotoCoreError as error:  # no credentials, no region, unknown profile
        raise TargetError(f"AWS is not configured: {error}") from None
    missing = [key.value for key in _NEEDED if key.value not in outputs]
    if missing:
        raise TargetError(f"stack {stack_name!r} lacks the outputs {', '.join(missing)}: is it outlast?")
    resources = Resources(
        jobs_table=outputs[Output.JOBS_TABLE_NAME],
        jobs_queue_url=outputs[Output.JOBS_QUEUE_URL],
        dlq_url=outputs[Output.DLQ_URL],
        isolation_queue_url=outputs[Output.ISOLATION_QUEUE_URL],
        isolation_dlq_url=outputs[Output.ISOLATION_DLQ_URL],
        payload_bucket=outputs[Output.PAYLOAD_BUCKET_NAME],
        webhooks_table=outputs.get(Output.WEBHOOKS_TABLE_NAME),
        webhooks_queue_url=outputs.get(Output.WEBHOOKS_QUEUE_URL),
        webhooks_dlq_url=outputs.get(Output.WEBHOOKS_DLQ_URL),
        budgets_table=outputs.get(Output.BUDGETS_TABLE_NAME),
        batches_table=outputs.get(Output.BATCHES_TABLE_NAME),
        default_monthly_tokens=int(outputs.get(Output.DEFAULT_MONTHLY_TOKENS, "0")),
        max_running_per_tenant=int(outputs.get(Output.MAX_RUNNING_PER_TENANT, "0")),
        **_stage_settings(outputs),
    )

    def clients(service: str) -> Any:
        return session.client(service)  # type: ignore[call-overload]

    return Target(f"stack {stack_name} ({session.region_name})", resources, clients, 1)


_NEEDED = (
    Output.JOBS_TABLE_NAME,
    Output.JOBS_QUEUE_URL,
    Output.DLQ_URL,
    Output.ISOLATION_QUEUE_URL,
    Output.ISOLATION_DLQ_URL,
    Output.PAYLOAD_BUCKET_NAME,
)


def _stack_outputs(cloudformation: Any, stack_name: str) -> dict[str, str]:
    stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    return {str(o["OutputKey"]): str(o["OutputValue"]) for o in stacks[0].get("Outputs", [])}
