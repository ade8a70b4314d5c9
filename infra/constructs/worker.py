"""The worker: claims jobs from the jobs queue, calls the model, writes the terminal state.

Batches of up to 10 messages after a 2 s batching window, run concurrently inside one invocation,
partial failures reported per message. A second trigger, on the isolation queue, hands the same
code one job per invocation (crash isolation, DESIGN.md "Lifecycle"). The event source's maximum
concurrency caps how many invocations call the provider at once: it protects the provider's rate
limit, and keeps Lambda from throttling the queue's pollers.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra import grants, nag
from infra.config import WORKER_BATCH_SIZE, WORKER_BATCH_WINDOW_SECONDS, StageConfig
from infra.constructs.fairness import Fairness
from infra.constructs.outbox import Outbox
from infra.constructs.storage import Storage
from infra.constructs.streaming import Streaming
from infra.environment import worker_environment
from infra.function_factory import FunctionFactory, FunctionSpec, removal_policy
from infra.names import OPENAI_SECRET, FunctionName
from infra.packaging import WORKER_LAYER
from shared import resources as r


class Worker(Construct):
    """The OpenAI key secret, the worker function and its queue trigger."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        factory: FunctionFactory,
        storage: Storage,
        outbox: Outbox,
        streaming: Streaming,
        fairness: Fairness,
    ) -> None:
        super().__init__(scope, construct_id)
        # Created with a random placeholder; the operator stores the real key (docs/deploy.md).
        # The value is never in code, the template or an environment variable.
        self.openai_secret = secretsmanager.Secret(
            self,
            OPENAI_SECRET,
            description="outlast: the OpenAI API key used by the worker (set by the operator)",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=32, exclude_punctuation=True
            ),
            removal_policy=removal_policy(config),
        )
        self.function = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.WORKER,
                layer=WORKER_LAYER,
                environment=worker_environment(
                    config,
                    jobs_table=storage.jobs_table.table_name,
                    bucket=storage.payload_bucket.bucket_name,
                    jobs_queue_url=outbox.jobs_queue.queue_url,
                    dlq_url=outbox.dead_letter_queue.queue_url,
                    isolation_queue_url=outbox.isolation_queue.queue_url,
                    isolation_queue_arn=outbox.isolation_queue.queue_arn,
                    isolation_dlq_url=outbox.isolation_dead_letter_queue.queue_url,
                    openai_secret_arn=self.openai_secret.secret_arn,
                    output_events_table=streaming.table.table_name,
                    slots_table=fairness.slots_table.table_name,
                ),
                timeout=Duration.seconds(config.worker_timeout_seconds),
                memory_mb=config.worker_memory_mb,
                description="outlast worker: claim a job, call the model, record the outcome",
            ),
        )
        # Claim, heartbeat, progress and transitions (UpdateItem), the input (GetItem), results and step
        # checkpoints (PutItem), a multi-step job's checkpoints (Query of its own partition).
        grants.grant_table(storage.jobs_table, self.function, ["GetItem", "PutItem", "UpdateItem", "Query"])
        # A capped tenant's running slot: taken (a conditional PutItem), extended by heartbeats
        # (UpdateItem), released by its token (DeleteItem).
        grants.grant_table(fairness.slots_table, self.function, ["PutItem", "UpdateItem", "DeleteItem"])
        # Inputs, and results: every claim after the first (and every redrive) looks for a result an
        # earlier claim stored and never recorded, to adopt it instead of paying for the call again.
        grants.grant_objects(
            storage.payload_bucket, self.function, ["GetObject"], [r.INPUT_PREFIX, r.RESULT_PREFIX]
        )
        grants.grant_objects(storage.payload_bucket, self.function, ["PutObject"], [r.RESULT_PREFIX])
        grants.grant_missing_objects_as_404(storage.payload_bucket, self.function)
        # A job the worker hands back to Pending is dispatched by a fresh delayed message to its
        # lane's queue (the event sources grant receive and delete).
        grants.grant_send(outbox.jobs_queue, self.function)
        grants.grant_send(outbox.isolation_queue, self.function)
        # Poison messages are moved to their queue's DLQ by the worker itself (DESIGN.md, "Delivery
        # and execution").
        grants.grant_send(outbox.dead_letter_queue, self.function)
        grants.grant_send(outbox.isolation_dead_letter_queue, self.function)
        grants.grant_secret_value(self.openai_secret, self.function)
        # A streaming call's events (conditional PutItem, one per flush).
        streaming.grant_write_events(self.function)
        self.function.add_event_source(
            sources.SqsEventSource(
                outbox.jobs_queue,
                batch_size=WORKER_BATCH_SIZE,
                max_batching_window=Duration.seconds(WORKER_BATCH_WINDOW_SECONDS),
                report_batch_item_failures=True,
                max_concurrency=config.worker_max_concurrency,
            )
        )
        # The isolation lane: one job per invocation, so a crash is charged to the job that caused
        # it (its claim records `solo`). No batching window: a batch of one waits for nobody.
        self.function.add_event_source(
            sources.SqsEventSource(
                outbox.isolation_queue,
                batch_size=1,
                report_batch_item_failures=True,
                max_concurrency=config.isolation_max_concurrency,
            )
        )
        nag.acknowledge(
            self.openai_secret,
            "AwsSolutions-SMG4",
            "An OpenAI API key cannot be rotated by a Secrets Manager rotation function: the operator "
            "creates a new key in the OpenAI console, stores it with put-secret-value and revokes the old "
            "one (docs/deploy.md). Workers pick the new value up within the Parameters cache age.",
        )
