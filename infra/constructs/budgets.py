"""Token budgets (DESIGN.md, "Token budgets: reserve, then settle"): the budgets table and GET /v1/budget.

The table holds per-tenant limits, per-month counters and one reservation per run of a job. It
has no stream: every budget change is a two-item transaction (the counter with its
reservation), and a table of its own keeps those transactions away from the jobs table's
stream and from the idempotency table's claims and rate counters, which a transaction would
otherwise copy whole in moto (DESIGN.md, "moto facts"). Open reservations carry the keys of a
sparse index the sweeper reads (`byCheck`, sharded, all attributes projected: a reservation is a
few hundred bytes). Each function that touches the table is granted its own actions where it is
made (submit and status in the Api, the notifier in Realtime, the sweeper in Sweeper).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra import capacity, grants
from infra.config import StageConfig
from infra.environment import budget_environment
from infra.function_factory import FunctionFactory, FunctionSpec, removal_policy
from infra.names import BUDGETS_TABLE, FunctionName
from infra.packaging import API_LAYER
from shared import resources as r

_STRING = dynamodb.AttributeType.STRING


class Budgets(Construct):
    """The budgets table and the function that answers GET /v1/budget."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: StageConfig, factory: FunctionFactory
    ) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            BUDGETS_TABLE,
            partition_key=dynamodb.Attribute(name=r.BUDGETS_PARTITION_KEY, type=_STRING),
            sort_key=dynamodb.Attribute(name=r.BUDGETS_SORT_KEY, type=_STRING),
            **capacity.table_billing(config),
            time_to_live_attribute=r.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=config.retain_data,
            removal_policy=removal_policy(config),
        )
        self.table.add_global_secondary_index(
            index_name=r.BUDGET_CHECK_INDEX,
            partition_key=dynamodb.Attribute(name=r.BUDGET_CHECK_PARTITION, type=_STRING),
            sort_key=dynamodb.Attribute(name=r.BUDGET_CHECK_SORT, type=_STRING),
            projection_type=dynamodb.ProjectionType.ALL,
            **capacity.index_capacity(config),
        )
        capacity.auto_scale(self.table, config, indexes=(r.BUDGET_CHECK_INDEX,))
        self.function = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.BUDGET,
                layer=API_LAYER,
                environment=budget_environment(config, budgets_table=self.table.table_name),
                timeout=Duration.seconds(10),
                memory_mb=256,
                description="outlast budget: GET /v1/budget",
                traced=config.api_tracing,
            ),
        )
        # The tenant's limit and this period's counter, in one BatchGetItem.
        grants.grant_table(self.table, self.function, ["BatchGetItem"])
