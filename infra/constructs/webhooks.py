"""Webhooks for backends (DESIGN.md, "Webhooks for backends"): the store, the queue, the sender.

- The webhooks table holds endpoints (with their signing secrets) and delivery records (TTL 30
  days after their last attempt); point-in-time recovery and the AWS managed key like every
  table, and the stage's removal policy: endpoints and secrets are configuration worth keeping.
  Its tenant index is sparse (endpoint items only) and projects no secret.
- The webhooks queue (SSE-SQS, TLS only) carries one message per (event, endpoint); its DLQ
  catches what the sender parks there after the seventh attempt (and crash loops, by the
  redrive policy). Retries wait in the queue itself: the sender sets each message's visibility.
- The sender: its own role, which may read endpoints and write delivery records and endpoint
  state (GetItem, UpdateItem) on the table, change visibility on the queue (the event source
  adds receive and delete), and send to the DLQ. Nothing else: no jobs table, no secrets service.
- The notifier (the Realtime construct's) is granted Query on the tenant index only, and
  SendMessage on the queue (`grant_enqueue`): it can never read a secret.
- The egress flag that allows plain http and loopback receivers is "false" in this template,
  always; local mode turns it on for itself (outlast.local.capabilities.functions).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import capacity, grants
from infra.config import DLQ_EXTRA_RECEIVES, DLQ_RETENTION_DAYS, VISIBILITY_TIMEOUT_FACTOR, StageConfig
from infra.constructs.outbox import secure_queue
from infra.environment import webhook_sender_environment
from infra.function_factory import FunctionFactory, FunctionSpec, removal_policy
from infra.names import WEBHOOKS_DLQ, WEBHOOKS_QUEUE, WEBHOOKS_TABLE, FunctionName
from infra.packaging import API_LAYER
from shared import resources as r
from shared.webhooks.sender import MAX_ATTEMPTS, SENDER_TIMEOUT_SECONDS

_STRING = dynamodb.AttributeType.STRING
SENDER_BATCH_SIZE = 10
# The longest a delivery can wait in the queue: six scheduled waits (17.5 h), or seven 429s asking
# for 12 h each (84 h). Four days hold either; the DLQ keeps what it gets for 14.
QUEUE_RETENTION = Duration.days(4)


class Webhooks(Construct):
    """The webhooks table, the webhooks queue and its DLQ, and the sender on the queue."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, factory: FunctionFactory
    ) -> None:
        super().__init__(scope, construct_id)
        self.table = self._table(config)
        self.dead_letter_queue = secure_queue(
            self, WEBHOOKS_DLQ, retention_period=Duration.days(DLQ_RETENTION_DAYS)
        )
        self.queue = secure_queue(
            self,
            WEBHOOKS_QUEUE,
            retention_period=QUEUE_RETENTION,
            # Only a crashed or timed-out sender leaves it in place: every attempt sets its own wait.
            visibility_timeout=Duration.seconds(VISIBILITY_TIMEOUT_FACTOR * SENDER_TIMEOUT_SECONDS),
            # The sender parks a message after attempt 7 itself; this catches crash loops.
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=MAX_ATTEMPTS + DLQ_EXTRA_RECEIVES
            ),
        )
        self.sender = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.WEBHOOK_SENDER,
                layer=API_LAYER,
                environment=webhook_sender_environment(
                    config,
                    webhooks_table=self.table.table_name,
                    webhooks_queue_url=self.queue.queue_url,
                    webhooks_dlq_url=self.dead_letter_queue.queue_url,
                ),
                timeout=Duration.seconds(SENDER_TIMEOUT_SECONDS),
                memory_mb=256,
                description="outlast webhook sender: webhooks queue -> signed POSTs to tenants' endpoints",
            ),
        )
        grants.grant_table(self.table, self.sender, ["GetItem", "UpdateItem"])
        grants.grant_send(self.dead_letter_queue, self.sender)
        # ReceiveMessage, DeleteMessage and ChangeMessageVisibility come with the event source.
        self.sender.add_event_source(
            sources.SqsEventSource(self.queue, batch_size=SENDER_BATCH_SIZE, report_batch_item_failures=True)
        )

    def _table(self, config: StageConfig) -> dynamodb.Table:
        table = dynamodb.Table(
            self,
            WEBHOOKS_TABLE,
            partition_key=dynamodb.Attribute(name=r.WEBHOOKS_PARTITION_KEY, type=_STRING),
            sort_key=dynamodb.Attribute(name=r.WEBHOOKS_SORT_KEY, type=_STRING),
            **capacity.table_billing(config),
            time_to_live_attribute=r.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=removal_policy(config),
        )
        table.add_global_secondary_index(
            index_name=r.WEBHOOKS_TENANT_INDEX,
            partition_key=dynamodb.Attribute(name=r.WEBHOOKS_TENANT_INDEX_PARTITION, type=_STRING),
            sort_key=dynamodb.Attribute(name=r.WEBHOOKS_TENANT_INDEX_SORT, type=_STRING),
            projection_type=dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=list(r.WEBHOOKS_TENANT_INDEX_PROJECTION),
            **capacity.index_capacity(config),
        )
        capacity.auto_scale(table, config, indexes=(r.WEBHOOKS_TENANT_INDEX,))
        return table

    def grant_enqueue(self, notifier: lambda_.IFunction) -> None:
        """The notifier's part: Query on the tenant index (which projects no secret), send to the queue."""
        iam.Grant.add_to_principal(
            grantee=notifier,
            actions=["dynamodb:Query"],
            resource_arns=[f"{self.table.table_arn}/index/{r.WEBHOOKS_TENANT_INDEX}"],
        )
        grants.grant_send(self.queue, notifier)
