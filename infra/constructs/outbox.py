"""The outbox: from a committed job item to a message on the jobs queue (and the queues beside it).

The jobs table's stream is the outbox. The relay reads only INSERTs of job items (an event
source filter, so other records never invoke it), and sends each job id to the jobs queue.
Stream batches that keep failing are bisected, retried a bounded number of times, and then
described (metadata only) on the relay's own failure queue, for the alarm; the sweeper re-sends
the jobs themselves once their dispatch grace has passed.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import grants, nag
from infra.config import (
    DLQ_RETENTION_DAYS,
    RELAY_BATCH_SIZE,
    RELAY_MAX_RECORD_AGE_SECONDS,
    RELAY_RETRY_ATTEMPTS,
    StageConfig,
)
from infra.constructs.storage import Storage
from infra.environment import relay_environment
from infra.function_factory import FunctionFactory, FunctionSpec
from infra.names import (
    ISOLATION_DLQ,
    ISOLATION_QUEUE,
    JOBS_DLQ,
    JOBS_QUEUE,
    RELAY_FAILURE_QUEUE,
    FunctionName,
)
from infra.packaging import API_LAYER
from shared import resources as r

_LIST_STREAMS_REASON = (
    "The relay's stream event source needs dynamodb:ListStreams, which supports no resource-level "
    "permissions (AWS requires Resource *); its other stream actions are limited to the jobs table's stream."
)


def secure_queue(
    scope: Construct,
    construct_id: str,
    *,
    retention_period: Duration | None = None,
    visibility_timeout: Duration | None = None,
    dead_letter_queue: sqs.DeadLetterQueue | None = None,
) -> sqs.Queue:
    """An SQS queue encrypted with SSE-SQS (no key to pay for) whose policy denies requests without TLS."""
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=retention_period,
        visibility_timeout=visibility_timeout,
        dead_letter_queue=dead_letter_queue,
    )


def guarded_stream_source(
    table: dynamodb.ITable,
    *,
    failures: sqs.IQueue,
    starting_position: lambda_.StartingPosition,
    batch_size: int,
    retry_attempts: int,
    max_record_age_seconds: int,
    pattern: dict[str, object],
) -> sources.DynamoEventSource:
    """A DynamoDB stream trigger that never blocks its shard: failed batches are bisected, retried a
    bounded number of times within a bounded age, then described (metadata only) on `failures`;
    the function reports the records that failed (partial batch responses); `pattern` filters."""
    return sources.DynamoEventSource(
        table,
        starting_position=starting_position,
        batch_size=batch_size,
        bisect_batch_on_error=True,
        retry_attempts=retry_attempts,
        max_record_age=Duration.seconds(max_record_age_seconds),
        report_batch_item_failures=True,
        on_failure=sources.SqsDlq(failures),
        filters=[lambda_.FilterCriteria.filter(pattern)],
    )


class Outbox(Construct):
    """Jobs queue + DLQ, isolation queue + DLQ, the relay, its stream mapping and its failure queue."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        factory: FunctionFactory,
        storage: Storage,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = secure_queue(
            self, JOBS_DLQ, retention_period=Duration.days(DLQ_RETENTION_DAYS)
        )
        self.jobs_queue = secure_queue(
            self,
            JOBS_QUEUE,
            visibility_timeout=Duration.seconds(config.jobs_queue_visibility_seconds),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=config.dlq_max_receive_count
            ),
        )
        # Crash isolation (DESIGN.md, "Lifecycle"): a job whose batch crashed a worker runs from
        # this queue, one per invocation, so it can only ever take itself down. Its own DLQ keeps
        # such jobs apart from the shared queue's poison for on-call.
        self.isolation_dead_letter_queue = secure_queue(
            self, ISOLATION_DLQ, retention_period=Duration.days(DLQ_RETENTION_DAYS)
        )
        self.isolation_queue = secure_queue(
            self,
            ISOLATION_QUEUE,
            visibility_timeout=Duration.seconds(config.jobs_queue_visibility_seconds),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.isolation_dead_letter_queue, max_receive_count=config.dlq_max_receive_count
            ),
        )
        self.relay_failures = secure_queue(
            self, RELAY_FAILURE_QUEUE, retention_period=Duration.days(DLQ_RETENTION_DAYS)
        )
        self.relay = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.RELAY,
                layer=API_LAYER,
                environment=relay_environment(self.jobs_queue.queue_url),
                timeout=Duration.seconds(30),
                memory_mb=256,
                description="outlast relay: new job items on the jobs table stream -> jobs queue",
                other_star_resources=_LIST_STREAMS_REASON,
            ),
        )
        grants.grant_send(self.jobs_queue, self.relay)
        self.relay.add_event_source(
            guarded_stream_source(
                storage.jobs_table,
                failures=self.relay_failures,
                # Duplicates are harmless downstream (the claim is conditional), missed jobs are not.
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=RELAY_BATCH_SIZE,
                retry_attempts=RELAY_RETRY_ATTEMPTS,
                max_record_age_seconds=RELAY_MAX_RECORD_AGE_SECONDS,
                pattern={
                    "eventName": lambda_.FilterRule.is_equal("INSERT"),
                    "dynamodb": {
                        "NewImage": {r.TYPE_ATTRIBUTE: {"S": lambda_.FilterRule.is_equal(r.JOB_ITEM_TYPE)}}
                    },
                },
            )
        )
        nag.acknowledge(
            self.relay_failures,
            "AwsSolutions-SQS3",
            "This queue is itself a dead-letter destination: the on-failure destination of the relay's "
            "stream mapping, holding batch metadata for the relay-failures alarm and operators. Nothing "
            "consumes it automatically, so a further DLQ would never receive anything.",
        )
