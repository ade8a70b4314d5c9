"""The sweeper: on a schedule, recovers lost dispatches, expired leases and stuck cancellations,
and repairs budget reservations nothing settled.

It reads the sparse, sharded sweeper index (never a scan), makes conditional updates, and re-sends
recovered jobs to the jobs queue (isolated jobs to the isolation queue). A failed run is not
retried: the next scheduled run sweeps the same index, and overlapping runs are harmless because
every recovery is a conditional write.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from infra import grants
from infra.config import StageConfig
from infra.constructs.budgets import Budgets
from infra.constructs.documents import Documents
from infra.constructs.fairness import Fairness
from infra.constructs.outbox import Outbox
from infra.constructs.storage import Storage
from infra.environment import sweeper_environment
from infra.function_factory import FunctionFactory, FunctionSpec
from infra.names import SWEEP_RULE, FunctionName
from infra.packaging import API_LAYER
from shared import resources as r


class Sweeper(Construct):
    """The sweeper function and its EventBridge schedule."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        factory: FunctionFactory,
        storage: Storage,
        outbox: Outbox,
        budgets: Budgets,
        documents: Documents,
        fairness: Fairness,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.SWEEPER,
                layer=API_LAYER,
                environment=sweeper_environment(
                    config,
                    jobs_table=storage.jobs_table.table_name,
                    bucket=storage.payload_bucket.bucket_name,
                    jobs_queue_url=outbox.jobs_queue.queue_url,
                    isolation_queue_url=outbox.isolation_queue.queue_url,
                    budgets_table=budgets.table.table_name,
                    documents_table=documents.table.table_name,
                    slots_table=fairness.slots_table.table_name,
                ),
                # Shorter than the default schedule's period, so runs rarely overlap.
                timeout=Duration.seconds(55),
                memory_mb=256,
                description="outlast sweeper: lost dispatches, expired leases, stuck cancellations",
                retry_attempts=0,
            ),
        )
        # PutItem: failing a job whose input rides in the job item first copies the input out to an
        # item of its own (shared.retention.end_input), so that an operator may still redrive it.
        grants.grant_table(
            storage.jobs_table,
            self.function,
            ["Query", "GetItem", "UpdateItem", "PutItem"],
            indexes=[r.SWEEP_INDEX],
        )
        # Budget repair: open reservations by their sparse index, a check time moved (UpdateItem), a
        # settlement or release (a transaction of a conditional Delete and an Update).
        grants.grant_table(
            budgets.table,
            self.function,
            ["Query", "UpdateItem", "DeleteItem"],
            indexes=[r.BUDGET_CHECK_INDEX],
        )
        documents.grant_pin_repair(self.function)
        # An expired claim's running slot, released by its own token (a conditional DeleteItem).
        grants.grant_table(fairness.slots_table, self.function, ["DeleteItem"])
        grants.grant_send(outbox.jobs_queue, self.function)
        grants.grant_send(outbox.isolation_queue, self.function)
        self.rule = events.Rule(
            self,
            SWEEP_RULE,
            description="outlast: run the sweeper",
            schedule=events.Schedule.expression(config.sweep_schedule),
            targets=[
                targets.LambdaFunction(self.function, retry_attempts=0, max_event_age=Duration.minutes(5))
            ],
        )
