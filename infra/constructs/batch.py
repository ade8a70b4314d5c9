"""The batch tier (DESIGN.md, "Cost tiers: the token bill"): the batcher, its queue and DLQ, the
open batches' table, the poller and its schedule, their grants and alarms.

The worker hands a batch job's ready calls to the batcher's queue (the grant and the queue's URL
are given to it here); the queue's batching window (`batchWindowSeconds`, at most 300) gathers
calls into one invocation and so into one provider batch per model. The poller runs on a schedule
(`batchPollSchedule`), sees each open batch through and hands its jobs back to the jobs queues.
Alarms: the batcher's DLQ not empty, a batch open past its 24-hour window, a batch that failed or
expired (its calls fell back to flex, then standard: a cost, not an outage), a batch its batcher
died before recording (found by its intent, cancelled: a cost).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import capacity, grants
from infra.config import VISIBILITY_TIMEOUT_FACTOR, StageConfig
from infra.constructs.budgets import Budgets
from infra.constructs.outbox import Outbox, secure_queue
from infra.constructs.storage import Storage
from infra.constructs.worker import Worker
from infra.environment import batch_poller_environment, batcher_environment
from infra.function_factory import FunctionFactory, FunctionSpec, removal_policy
from infra.names import BATCH_DLQ, BATCH_POLL_RULE, BATCH_QUEUE, BATCHES_TABLE, FunctionName, Runbook
from infra.packaging import WORKER_LAYER
from shared import resources as r

# Up to this many calls per batcher invocation (SQS allows 10,000 with a batching window).
BATCHER_BATCH_SIZE = 1000
_MAX_RECEIVES = 5


class Batch(Construct):
    """The batcher and the poller, and everything only they use."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        factory: FunctionFactory,
        storage: Storage,
        outbox: Outbox,
        worker: Worker,
        budgets: Budgets,
    ) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            BATCHES_TABLE,
            partition_key=dynamodb.Attribute(
                name=r.BATCHES_PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            **capacity.table_billing(config),
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=config.retain_data,
            removal_policy=removal_policy(config),
        )
        capacity.auto_scale(self.table, config, indexes=())
        self.dead_letter_queue = secure_queue(self, BATCH_DLQ, retention_period=Duration.days(14))
        self.queue = secure_queue(
            self,
            BATCH_QUEUE,
            # Six times the function's timeout plus the batching window, as AWS advises (and as the
            # jobs queue has it): the calls of a batcher that died come back this long after.
            visibility_timeout=Duration.seconds(
                VISIBILITY_TIMEOUT_FACTOR * config.batcher_timeout_seconds + config.batch_window_seconds
            ),
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=_MAX_RECEIVES, queue=self.dead_letter_queue
            ),
        )
        secret = worker.openai_secret
        self.batcher = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.BATCHER,
                layer=WORKER_LAYER,
                environment=batcher_environment(
                    config,
                    jobs_table=storage.jobs_table.table_name,
                    batches_table=self.table.table_name,
                    openai_secret_arn=secret.secret_arn,
                ),
                timeout=Duration.seconds(config.batcher_timeout_seconds),
                memory_mb=512,
                description="outlast batcher: hand waiting calls to the provider's Batch API",
            ),
        )
        # A call's job is read (its hold), and its batch recorded on it (conditional UpdateItem).
        grants.grant_table(storage.jobs_table, self.batcher, ["GetItem", "UpdateItem"])
        # Its intent first, then the batch created, then the intent deleted (write-ahead: a batch its
        # batcher died before recording is found by the poller, functions.batch_poller.orphans).
        grants.grant_table(self.table, self.batcher, ["PutItem", "DeleteItem"])
        grants.grant_secret_value(secret, self.batcher)
        self.batcher.add_event_source(
            sources.SqsEventSource(
                self.queue,
                batch_size=BATCHER_BATCH_SIZE,
                max_batching_window=Duration.seconds(config.batch_window_seconds),
            )
        )
        # The worker hands calls over.
        grants.grant_send(self.queue, worker.function)
        worker.function.add_environment(r.ENV_BATCH_QUEUE_URL, self.queue.queue_url)

        self.poller = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.BATCH_POLLER,
                layer=WORKER_LAYER,
                environment=batch_poller_environment(
                    config,
                    jobs_table=storage.jobs_table.table_name,
                    bucket=storage.payload_bucket.bucket_name,
                    jobs_queue_url=outbox.jobs_queue.queue_url,
                    isolation_queue_url=outbox.isolation_queue.queue_url,
                    batches_table=self.table.table_name,
                    openai_secret_arn=secret.secret_arn,
                    budgets_table=budgets.table.table_name,
                ),
                timeout=Duration.seconds(55),
                memory_mb=512,
                description="outlast batch poller: see open provider batches through",
                retry_attempts=0,
            ),
        )
        # Jobs read and moved on (UpdateItem), results and step checkpoints written (PutItem), a
        # canceled job's input given its last expiry (shared.retention.end_input).
        grants.grant_table(storage.jobs_table, self.poller, ["GetItem", "UpdateItem", "PutItem"])
        # A large result goes to S3, unless one is there already (read back, as the worker does).
        grants.grant_objects(
            storage.payload_bucket, self.poller, ["GetObject", "PutObject"], [r.RESULT_PREFIX]
        )
        # A classify job the poller ends reads its labels from its input (batch_poller/finish.py).
        grants.grant_objects(storage.payload_bucket, self.poller, ["GetObject"], [r.INPUT_PREFIX])
        grants.grant_missing_objects_as_404(storage.payload_bucket, self.poller)
        # Open batches and intents listed and deleted; an orphaned batch recorded (conditional Put).
        grants.grant_table(self.table, self.poller, ["Scan", "DeleteItem", "PutItem"])
        grants.grant_send(outbox.jobs_queue, self.poller)
        grants.grant_send(outbox.isolation_queue, self.poller)
        grants.grant_secret_value(secret, self.poller)
        # Late usage (discarded answers the provider billed): a transaction of the (job, batch)
        # marker's conditional Put and the period counter's Update (shared.budgets.settle_late).
        grants.grant_table(budgets.table, self.poller, ["PutItem", "UpdateItem"])
        self.rule = events.Rule(
            self,
            BATCH_POLL_RULE,
            description="outlast: look at open provider batches",
            schedule=events.Schedule.expression(config.batch_poll_schedule),
            targets=[
                targets.LambdaFunction(self.poller, retry_attempts=0, max_event_age=Duration.minutes(5))
            ],
        )
        self.alarms = self._alarms(config)

    def _alarms(self, config: StageConfig) -> list[cloudwatch.Alarm]:
        def poller_metric(name: str) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=config.metrics_namespace,
                metric_name=name,
                dimensions_map={"service": FunctionName.BATCH_POLLER.service},
                statistic=cloudwatch.Stats.MAXIMUM if name == "BatchesOverdue" else cloudwatch.Stats.SUM,
                period=Duration.minutes(15),
            )

        specs = (
            (
                "BatcherDlqNotEmpty",
                self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(1), statistic=cloudwatch.Stats.MAXIMUM
                ),
                "Calls are in the batcher's DLQ: their jobs wait on a batch that was never created.",
                "Read the batcher's errors, fix the cause, then redrive the DLQ to the batcher's queue.",
                Runbook.BATCHER_DLQ_NOT_EMPTY,
            ),
            (
                "BatchOverdue",
                poller_metric("BatchesOverdue"),
                "A provider batch is open past its 24-hour completion window.",
                "Cancel it at the provider: the poller keeps its answers and sends the rest to flex.",
                Runbook.BATCH_OVERDUE,
            ),
            (
                "BatchOrphaned",
                poller_metric("BatchesOrphaned"),
                "A provider batch was found that its batcher died before recording: it was cancelled.",
                "Nothing for the jobs (their calls went into another batch); read the batcher's errors.",
                Runbook.BATCH_ORPHANED,
            ),
            (
                "BatchFailed",
                poller_metric("BatchesFailed"),
                "A provider batch failed or expired: its calls fell back to flex, then standard.",
                "Read the batch's error file at the provider; an occasional expiry needs nothing.",
                Runbook.BATCH_FAILED,
            ),
        )
        return [
            cloudwatch.Alarm(
                self,
                construct_id,
                metric=metric,
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description=f"{meaning} What to do: {action} Runbook: {runbook.link}",
            )
            for construct_id, metric, meaning, action, runbook in specs
        ]
