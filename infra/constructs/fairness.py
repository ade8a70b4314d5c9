"""Fairness between tenants (DESIGN.md, "Fairness between tenants"): the running slots table.

One item per held slot of a capped tenant (`{group}#{k}`, k < its cap), taken by a claim's
conditional write and released by its lease token. No stream (a slot write is no job change
that anyone reads), no index, no TTL (a released slot is deleted; an expired one is taken over
by the next claim, so the table never holds more than the caps add up to). Each function that
touches it is granted its own actions where it is made (the worker in Worker, the sweeper in
Sweeper). The queues' fairness needs no resource: SQS fair queues are standard queues whose
messages carry a MessageGroupId.
"""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra import capacity
from infra.config import StageConfig
from infra.function_factory import removal_policy
from infra.names import SLOTS_TABLE
from shared import resources as r


class Fairness(Construct):
    """The running slots table."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig) -> None:
        super().__init__(scope, construct_id)
        self.slots_table = dynamodb.Table(
            self,
            SLOTS_TABLE,
            partition_key=dynamodb.Attribute(name=r.SLOTS_PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            **capacity.table_billing(config),
            # Priced per GB of a table that holds a few bytes per running job: kept on, as on
            # every table, rather than a cdk-nag exception to explain.
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=removal_policy(config),
        )
        capacity.auto_scale(self.slots_table, config, indexes=())
