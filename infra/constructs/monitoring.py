"""Alarms and a dashboard. Each alarm's description says what it means, what to do, and where
the runbook section is (docs/runbook.md#<anchor>). With `alarmEmail` set, alarms notify an
encrypted SNS topic with an email subscription.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Aws, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import StageConfig
from infra.constructs.api import Api
from infra.constructs.documents import Documents
from infra.constructs.outbox import Outbox
from infra.constructs.realtime import Realtime
from infra.constructs.streaming import Streaming
from infra.constructs.webhooks import Webhooks
from infra.function_factory import removal_policy
from infra.names import ALARM_TOPIC, SWEEPER_RECOVERIES_METRIC, FunctionName, Runbook
from shared import resources as r
from shared.budgets import NEAR_LIMIT_PERCENT

_GTE = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
_ONE_MINUTE = Duration.minutes(1)
_FIVE_MINUTES = Duration.minutes(5)
# A tenant flagged noisy for a moment is what fair queues are for; for 15 minutes, a capacity question.
_NOISY_PERIODS = 3


@dataclass(frozen=True)
class AlarmSpec:
    """One alarm: the metric, when it fires, and what the reader should do."""

    construct_id: str
    metric: cloudwatch.IMetric
    threshold: float
    meaning: str
    action: str
    runbook: Runbook
    evaluation_periods: int = 1

    @property
    def description(self) -> str:
        """What it means, what to do, where to read more: the text an on-call person sees first."""
        return f"{self.meaning} What to do: {self.action} Runbook: {self.runbook.link}"


class Monitoring(Construct):
    """Alarms on the failure signals of every stage of a job's journey, and one dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        api: Api,
        outbox: Outbox,
        realtime: Realtime,
        streaming: Streaming,
        webhooks: Webhooks,
        documents: Documents,
        functions: Mapping[FunctionName, lambda_.IFunction],
        alarms: Sequence[cloudwatch.Alarm] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = self._topic(config) if config.alarm_email else None
        # Alarms a capability keeps in its own construct (infra/constructs/batch.py) notify here too.
        for alarm in alarms:
            if self.topic is not None:
                alarm.add_alarm_action(actions.SnsAction(self.topic))
                alarm.add_ok_action(actions.SnsAction(self.topic))
        self.sweeper_recoveries = cloudwatch.Metric(
            namespace=config.metrics_namespace,
            metric_name=SWEEPER_RECOVERIES_METRIC,
            dimensions_map={"service": FunctionName.SWEEPER.service},
            statistic=cloudwatch.Stats.SUM,
            period=Duration.minutes(15),
        )
        relay = functions[FunctionName.RELAY]
        self.iterator_age = relay.metric(
            "IteratorAge", statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES
        )
        self.notifier_iterator_age = realtime.notifier.metric(
            "IteratorAge", statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES
        )
        self.output_pusher_iterator_age = streaming.pusher.metric(
            "IteratorAge", statistic=cloudwatch.Stats.MAXIMUM, period=_FIVE_MINUTES
        )
        self.output_push_failures = self._metric(
            config, "OutputPushFailures", FunctionName.OUTPUT_PUSHER, cloudwatch.Stats.SUM
        )
        self.push_failures = cloudwatch.Metric(
            namespace=config.metrics_namespace,
            metric_name="PushFailures",
            dimensions_map={"service": FunctionName.NOTIFIER.service},
            statistic=cloudwatch.Stats.SUM,
            period=_FIVE_MINUTES,
        )
        self.webhook_failure_rate = self._webhook_failure_rate(config)
        self.budget_committed = self._metric(
            config, "BudgetCommittedPercent", FunctionName.SUBMIT, cloudwatch.Stats.MAXIMUM
        )
        self.budget_exceeded = self._metric(
            config, "BudgetExceeded", FunctionName.SUBMIT, cloudwatch.Stats.SUM
        )
        # Settlements happen in the notifier and, for what it missed, in the sweeper.
        self.budget_overruns = cloudwatch.MathExpression(
            expression="FILL(notifier, 0) + FILL(sweeper, 0)",
            using_metrics={
                name.service: self._metric(config, "BudgetOverruns", name, cloudwatch.Stats.SUM)
                for name in (FunctionName.NOTIFIER, FunctionName.SWEEPER)
            },
            label="BudgetOverruns",
            period=_FIVE_MINUTES,
        )
        specs = [
            AlarmSpec(
                "IngestDlqNotEmpty",
                documents.dead_letter_queue.metric_approximate_number_of_messages_visible(
                    period=_ONE_MINUTE, statistic=cloudwatch.Stats.MAXIMUM
                ),
                1,
                "Messages are in the ingest DLQ: upload notifications that are not about a document "
                "(parked at once, with a reason attribute), or that kept crashing or timing out the ingest.",
                "Read the messages and their `reason`, and the ingest logs for the document ids; a "
                "document whose notification is there stays AwaitingUpload until it expires.",
                Runbook.INGEST_DLQ_NOT_EMPTY,
            ),
            AlarmSpec(
                "IngestOldestMessageAge",
                documents.queue.metric_approximate_age_of_oldest_message(
                    period=_FIVE_MINUTES, statistic=cloudwatch.Stats.MAXIMUM
                ),
                config.oldest_message_alarm_seconds,
                "Uploads wait in the ingest queue longer than expected: documents stay AwaitingUpload.",
                "Check ingest errors, throttles and duration, and ingestMaxConcurrency.",
                Runbook.INGEST_OLDEST_MESSAGE_AGE,
            ),
            AlarmSpec(
                "DlqNotEmpty",
                outbox.dead_letter_queue.metric_approximate_number_of_messages_visible(
                    period=_ONE_MINUTE, statistic=cloudwatch.Stats.MAXIMUM
                ),
                1,
                "Messages are in the jobs DLQ: poison messages, or jobs whose worker crashed repeatedly.",
                "Inspect them with `outlast ops dlq list`, fix the cause, then `outlast ops dlq redrive`.",
                Runbook.DLQ_NOT_EMPTY,
            ),
            AlarmSpec(
                "IsolationDlqNotEmpty",
                outbox.isolation_dead_letter_queue.metric_approximate_number_of_messages_visible(
                    period=_ONE_MINUTE, statistic=cloudwatch.Stats.MAXIMUM
                ),
                1,
                "Messages are in the isolation DLQ: jobs that kept crashing the worker even one at a time "
                "and whose message outlived the crash accounting, or poison sent to the isolation queue.",
                "Inspect them with `outlast ops dlq list --queue isolation`, then redrive or purge.",
                Runbook.ISOLATION_DLQ_NOT_EMPTY,
            ),
            AlarmSpec(
                "OldestMessageAge",
                outbox.jobs_queue.metric_approximate_age_of_oldest_message(
                    period=_FIVE_MINUTES, statistic=cloudwatch.Stats.MAXIMUM
                ),
                config.oldest_message_alarm_seconds,
                "Jobs wait in the queue longer than expected: the worker is too slow, capped or failing.",
                "Check worker errors and throttles, the provider's rate limits, and workerMaxConcurrency.",
                Runbook.OLDEST_MESSAGE_AGE,
            ),
            AlarmSpec(
                "NoisyTenants",
                # SQS fair queues (DESIGN.md, "Fairness between tenants"): tenants whose share of
                # the in-flight messages or of the consumers' time makes SQS serve others first.
                outbox.jobs_queue.metric(
                    "ApproximateNumberOfNoisyGroups", period=_FIVE_MINUTES, statistic=cloudwatch.Stats.MAXIMUM
                ),
                1,
                "For 15 minutes at least one tenant has flooded the jobs queue: SQS serves the other "
                "tenants first, and that tenant's jobs wait longer.",
                "Find the tenant (the worker's and the batch poller's `job finished` lines counted by "
                "tenant in Logs Insights), "
                "then cap it (`outlast ops tenants set --tenant T --max-running N`), or raise "
                "workerMaxConcurrency if every tenant is busy.",
                Runbook.NOISY_TENANTS,
                evaluation_periods=_NOISY_PERIODS,
            ),
            AlarmSpec(
                "StreamIteratorAge",
                self.iterator_age,
                config.iterator_age_alarm_seconds * 1000,
                "The relay lags behind the jobs table stream: new jobs reach the queue late.",
                "Check relay errors and throttles and its failure queue; the sweeper re-sends lost jobs.",
                Runbook.STREAM_ITERATOR_AGE,
            ),
            AlarmSpec(
                "RelayFailures",
                outbox.relay_failures.metric_approximate_number_of_messages_visible(
                    period=_ONE_MINUTE, statistic=cloudwatch.Stats.MAXIMUM
                ),
                1,
                "Stream batches exhausted the relay's retries; their jobs were not forwarded to the queue.",
                "Read the failure records and the relay logs; the sweeper re-sends the jobs after the grace.",
                Runbook.RELAY_FAILURES,
            ),
            AlarmSpec(
                "NotifierIteratorAge",
                self.notifier_iterator_age,
                config.iterator_age_alarm_seconds * 1000,
                "The notifier lags behind the jobs table stream: live updates reach clients late.",
                "Check notifier errors, throttles and duration (slow posts); clients still poll correctly.",
                Runbook.NOTIFIER_ITERATOR_AGE,
            ),
            AlarmSpec(
                "NotifierFailures",
                realtime.notifier_failures.metric_approximate_number_of_messages_visible(
                    period=_ONE_MINUTE, statistic=cloudwatch.Stats.MAXIMUM
                ),
                1,
                "Stream batches exhausted the notifier's retries: their live updates were not pushed.",
                "Read the failure records and the notifier logs (connections table errors); replay nothing.",
                Runbook.NOTIFIER_FAILURES,
            ),
            AlarmSpec(
                "OutputPusherIteratorAge",
                self.output_pusher_iterator_age,
                config.iterator_age_alarm_seconds * 1000,
                "The output pusher lags behind the output events stream: followers see streamed text late.",
                "Check output pusher errors, throttles and duration (slow posts); followers still catch up "
                "from GET /v1/jobs/{id}/output.",
                Runbook.OUTPUT_PUSHER_ITERATOR_AGE,
            ),
            AlarmSpec(
                "OutputPusherFailures",
                streaming.pusher_failures.metric_approximate_number_of_messages_visible(
                    period=_ONE_MINUTE, statistic=cloudwatch.Stats.MAXIMUM
                ),
                1,
                "Stream batches exhausted the output pusher's retries: their events did not reach followers.",
                "Read the failure records and the output pusher logs (connections table errors); the events "
                "are stored, and followers read them from GET /v1/jobs/{id}/output. Replay nothing.",
                Runbook.OUTPUT_PUSHER_FAILURES,
            ),
            AlarmSpec(
                "WebhooksDlqNotEmpty",
                webhooks.dead_letter_queue.metric_approximate_number_of_messages_visible(
                    period=_ONE_MINUTE, statistic=cloudwatch.Stats.MAXIMUM
                ),
                1,
                "Webhook deliveries are in the webhooks DLQ: an endpoint failed all seven attempts "
                "(about 17.5 hours), or the sender kept crashing on a message.",
                "See which endpoints with `outlast ops webhooks deliveries`, get them fixed, then "
                "`outlast ops webhooks redrive --dry-run`, then without --dry-run.",
                Runbook.WEBHOOKS_DLQ_NOT_EMPTY,
            ),
            AlarmSpec(
                "WebhookFailureRate",
                self.webhook_failure_rate,
                config.webhook_failure_alarm_percent,
                f"More than {config.webhook_failure_alarm_percent:g}% of webhook attempts failed in "
                f"15 minutes (counted from {config.webhook_failure_alarm_min_attempts} attempts on).",
                "Read the sender's logs (status, failure) and `outlast ops webhooks deliveries`: one "
                "endpoint down, or the sender's own egress (DNS, TLS) broken?",
                Runbook.WEBHOOK_FAILURE_RATE,
            ),
            AlarmSpec(
                "BudgetNearLimit",
                self.budget_committed,
                NEAR_LIMIT_PERCENT,
                f"A tenant's committed tokens (used plus reserved) passed {NEAR_LIMIT_PERCENT}% of its "
                "monthly budget: its submits will soon be refused with 403 budget_exceeded.",
                "Find the tenant in the submit logs ('tenant budget near its limit'), check its budget with "
                "`outlast ops budgets show --tenant T`, and raise it with `outlast ops budgets set` if the "
                "spend is expected.",
                Runbook.BUDGET_NEAR_LIMIT,
            ),
            AlarmSpec(
                "BudgetExhausted",
                self.budget_exceeded,
                1,
                "A tenant reached 100% of its monthly token budget: a submit did not fit and was refused "
                "with 403 budget_exceeded.",
                "Find the tenant in the submit logs ('tenant budget exhausted'); raise its budget with "
                "`outlast ops budgets set --tenant T --monthly-tokens N`, or let it wait for the reset.",
                Runbook.BUDGET_EXHAUSTED,
            ),
            AlarmSpec(
                "BudgetOverruns",
                self.budget_overruns,
                1,
                "A job used more tokens than it reserved: the reservation was not an upper bound (the "
                "reduce re-read factor, or two claims that both called the model for one step). Its usage "
                "was counted in full, so its tenant may pass its limit by the difference.",
                "Read the settlement log line ('a run used more tokens than it reserved') for the job and "
                "compare its usage with its plan; see the runbook before changing the bound.",
                Runbook.BUDGET_OVERRUNS,
            ),
            AlarmSpec(
                "SweeperRecoveries",
                self.sweeper_recoveries,
                config.sweeper_recovery_alarm_threshold,
                "The sweeper recovered many jobs: dispatches are being lost or leases keep expiring.",
                "Check the relay and the worker (timeouts, crashes) for why jobs got stuck.",
                Runbook.SWEEPER_RECOVERIES,
            ),
        ]
        for name, function in functions.items():
            specs.append(
                AlarmSpec(
                    f"{name.construct_id}Errors",
                    function.metric_errors(period=_FIVE_MINUTES, statistic=cloudwatch.Stats.SUM),
                    1,
                    f"The {name.value} function failed invocations (unhandled errors or timeouts).",
                    f"Read the {name.value} logs and traces; roll back if a deploy caused the failures.",
                    Runbook.FUNCTION_ERRORS,
                )
            )
            specs.append(
                AlarmSpec(
                    f"{name.construct_id}Throttles",
                    function.metric_throttles(period=_FIVE_MINUTES, statistic=cloudwatch.Stats.SUM),
                    1,
                    f"The {name.value} function was throttled: the account's concurrency is exhausted.",
                    "Find what uses the concurrency; ask for a higher Lambda concurrency quota if needed.",
                    Runbook.FUNCTION_THROTTLES,
                )
            )
        self.alarms = [self._alarm(spec) for spec in specs]
        self.dashboard = self._dashboard(api, outbox, functions)
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Token budgets: highest committed share of a limit (%), refusals, overruns",
                left=[self.budget_committed],
                right=[self.budget_exceeded, self.budget_overruns],
                width=24,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Live updates: notifier iterator age and failed pushes",
                left=[self.notifier_iterator_age],
                right=[self.push_failures],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Live updates: notifier failure queue",
                left=[realtime.notifier_failures.metric_approximate_number_of_messages_visible()],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Streaming output: pusher iterator age and failed pushes",
                left=[self.output_pusher_iterator_age],
                right=[self.output_push_failures],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Streaming output: pusher failure queue",
                left=[streaming.pusher_failures.metric_approximate_number_of_messages_visible()],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Webhooks: queue, in flight (waiting to retry) and DLQ",
                left=[
                    webhooks.queue.metric_approximate_number_of_messages_visible(label="visible"),
                    webhooks.queue.metric_approximate_number_of_messages_not_visible(label="in flight"),
                    webhooks.dead_letter_queue.metric_approximate_number_of_messages_visible(label="DLQ"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Webhooks: failed attempts (%)", left=[self.webhook_failure_rate], width=12
            ),
        )

    def _webhook_failure_rate(self, config: StageConfig) -> cloudwatch.MathExpression:
        """Failed attempts as a percentage of all attempts, 0 while there are too few to judge."""

        def sender_metric(name: str) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=config.metrics_namespace,
                metric_name=name,
                dimensions_map={"service": FunctionName.WEBHOOK_SENDER.service},
                statistic=cloudwatch.Stats.SUM,
                period=Duration.minutes(15),
            )

        return cloudwatch.MathExpression(
            expression=(
                f"IF(attempts >= {config.webhook_failure_alarm_min_attempts}, 100 * failures / attempts, 0)"
            ),
            using_metrics={
                "attempts": sender_metric(r.WEBHOOK_ATTEMPTS_METRIC),
                "failures": sender_metric(r.WEBHOOK_FAILURES_METRIC),
            },
            label="Webhook attempts failed (%)",
            period=Duration.minutes(15),
        )

    @staticmethod
    def _metric(config: StageConfig, name: str, function: FunctionName, statistic: str) -> cloudwatch.Metric:
        """One of the functions' EMF metrics (the `service` dimension is the function)."""
        return cloudwatch.Metric(
            namespace=config.metrics_namespace,
            metric_name=name,
            dimensions_map={"service": function.service},
            statistic=statistic,
            period=_FIVE_MINUTES,
        )

    def _topic(self, config: StageConfig) -> sns.Topic:
        # CloudWatch cannot publish to a topic encrypted with the AWS managed SNS key: it needs a
        # customer managed key whose policy lets the CloudWatch service use it.
        key = kms.Key(
            self,
            f"{ALARM_TOPIC}Key",
            description="outlast: encrypts the alarm topic",
            enable_key_rotation=True,
            removal_policy=removal_policy(config),
        )
        cloudwatch_service = iam.ServicePrincipal("cloudwatch.amazonaws.com")
        key.grant(cloudwatch_service, "kms:Decrypt", "kms:GenerateDataKey*")
        topic = sns.Topic(self, ALARM_TOPIC, display_name="outlast alarms", master_key=key, enforce_ssl=True)
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[cloudwatch_service],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
        if config.alarm_email:
            topic.add_subscription(subscriptions.EmailSubscription(config.alarm_email))
        return topic

    def _alarm(self, spec: AlarmSpec) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            spec.construct_id,
            metric=spec.metric,
            threshold=spec.threshold,
            evaluation_periods=spec.evaluation_periods,
            comparison_operator=_GTE,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=spec.description,
        )
        if self.topic is not None:
            alarm.add_alarm_action(actions.SnsAction(self.topic))
            alarm.add_ok_action(actions.SnsAction(self.topic))
        return alarm

    def _dashboard(
        self, api: Api, outbox: Outbox, functions: Mapping[FunctionName, lambda_.IFunction]
    ) -> cloudwatch.Dashboard:
        http_api = api.http_api
        queues = (
            outbox.jobs_queue,
            outbox.dead_letter_queue,
            outbox.isolation_queue,
            outbox.isolation_dead_letter_queue,
            outbox.relay_failures,
        )
        dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms), width=24, height=4)
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="API requests",
                left=[
                    http_api.metric_count(),
                    http_api.metric_client_error(),
                    http_api.metric_server_error(),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="API latency (p50, p99)",
                left=[http_api.metric_latency(statistic="p50"), http_api.metric_latency(statistic="p99")],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Queues: visible messages",
                left=[q.metric_approximate_number_of_messages_visible(label=q.node.id) for q in queues],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Jobs queue: in flight and oldest age",
                left=[outbox.jobs_queue.metric_approximate_number_of_messages_not_visible()],
                right=[outbox.jobs_queue.metric_approximate_age_of_oldest_message()],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Relay iterator age and sweeper recoveries",
                left=[self.iterator_age],
                right=[self.sweeper_recoveries],
                width=8,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Function errors",
                left=[f.metric_errors(label=n.value) for n, f in functions.items()],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Function throttles",
                left=[f.metric_throttles(label=n.value) for n, f in functions.items()],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Function duration (p99)",
                left=[f.metric_duration(statistic="p99", label=n.value) for n, f in functions.items()],
                width=8,
            ),
        )
        return dashboard
