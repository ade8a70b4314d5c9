"""Streaming output (DESIGN.md, "Streaming output: a view over persisted events").

- The output events table: one item per flush of a streaming call (`JOB#<id>` / `<attempt>#<seq>`),
  TTL (events live one input retention after their write), point-in-time recovery, the AWS managed
  key, and a stream (NEW_IMAGE) of its own: the jobs table's stream already has its two readers
  (the relay and the notifier), and DynamoDB serves two per shard.
- The output pusher is that stream's one consumer: INSERTs only (an event is written once), posted
  to the connections that follow the job. Failures are bisected, retried twice, given up after 5
  minutes (a follower catches up from GET /v1/jobs/{id}/output), then described (metadata only)
  on its own queue, for the alarm.
- The follow function serves the WebSocket routes `follow` and `unfollow` (the API's selection
  expression is `$request.body.action`), each with a route response.
- Roles: the worker may put events; the status function may query them (GET .../output); the follow
  function reads the job (the owner check), writes follows beside the connections, queries events
  (the replay) and posts to this stage's connections; the pusher reads the events stream, reads and
  forgets follows and posts to this stage's connections. `grant_*` below say which.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra import capacity, grants, nag
from infra.config import (
    DLQ_RETENTION_DAYS,
    OUTPUT_PUSHER_BATCH_SIZE,
    OUTPUT_PUSHER_MAX_RECORD_AGE_SECONDS,
    OUTPUT_PUSHER_RETRY_ATTEMPTS,
    StageConfig,
)
from infra.constructs.outbox import guarded_stream_source, secure_queue
from infra.constructs.realtime import Realtime
from infra.constructs.storage import Storage
from infra.environment import output_pusher_environment, ws_follow_environment
from infra.function_factory import FunctionFactory, FunctionSpec, removal_policy
from infra.names import (
    FOLLOW_ROUTES,
    OUTPUT_EVENTS_TABLE,
    OUTPUT_PUSHER_FAILURE_QUEUE,
    WEBSOCKET_STAGE_NAME,
    FunctionName,
)
from infra.packaging import API_LAYER
from shared import resources as r

_STRING = dynamodb.AttributeType.STRING
# A replay posts every event after the cursor before the route answers (API Gateway waits 29 s).
_FOLLOW_TIMEOUT = Duration.seconds(20)
_LIST_STREAMS_REASON = (
    "The output pusher's stream event source needs dynamodb:ListStreams, which supports no resource-level "
    "permissions (AWS requires Resource *); its other stream actions are limited to the output events "
    "table's stream."
)


class Streaming(Construct):
    """The output events table, the output pusher and its failure queue, and the follow routes."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        factory: FunctionFactory,
        storage: Storage,
        realtime: Realtime,
    ) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            OUTPUT_EVENTS_TABLE,
            partition_key=dynamodb.Attribute(name=r.OUTPUT_EVENTS_PARTITION_KEY, type=_STRING),
            sort_key=dynamodb.Attribute(name=r.OUTPUT_EVENTS_SORT_KEY, type=_STRING),
            **capacity.table_billing(config),
            # INSERTs reach the pusher; an event is written once, so nothing else does.
            stream=dynamodb.StreamViewType.NEW_IMAGE,
            time_to_live_attribute=r.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=config.retain_data,
            removal_policy=removal_policy(config),
        )
        capacity.auto_scale(self.table, config)
        connections_table = realtime.connections_table
        endpoint = realtime.stage.callback_url
        self.follow_function = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.WS_FOLLOW,
                layer=API_LAYER,
                environment=ws_follow_environment(
                    jobs_table=storage.jobs_table.table_name,
                    output_events_table=self.table.table_name,
                    connections_table=connections_table.table_name,
                    connections_endpoint=endpoint,
                ),
                timeout=_FOLLOW_TIMEOUT,
                memory_mb=256,
                description="outlast WebSocket follow/unfollow: a connection follows a job's streamed output",
                traced=config.api_tracing,
            ),
        )
        # The owner check reads the job; the follow is an UpdateItem of the connection's list and a
        # PutItem keyed by job; an unfollow deletes it; the replay queries the events and posts them.
        grants.grant_table(storage.jobs_table, self.follow_function, ["GetItem"])
        grants.grant_table(connections_table, self.follow_function, ["UpdateItem", "PutItem", "DeleteItem"])
        self.grant_read_events(self.follow_function)
        grants.grant_manage_connections(
            realtime.web_socket_api, WEBSOCKET_STAGE_NAME, self.follow_function, "POST"
        )
        follow = integrations.WebSocketLambdaIntegration("FollowIntegration", self.follow_function)
        for route_key in FOLLOW_ROUTES:
            realtime.web_socket_api.add_route(route_key, integration=follow, return_response=True)
        self.pusher_failures = secure_queue(
            self, OUTPUT_PUSHER_FAILURE_QUEUE, retention_period=Duration.days(DLQ_RETENTION_DAYS)
        )
        self.pusher = self._pusher(config, factory, realtime)
        self.functions = {
            FunctionName.WS_FOLLOW: self.follow_function,
            FunctionName.OUTPUT_PUSHER: self.pusher,
        }

    def grant_write_events(self, grantee: iam.IGrantable) -> None:
        """PutItem of events (the worker's conditional puts), nothing else."""
        grants.grant_table(self.table, grantee, ["PutItem"])

    def grant_read_events(self, grantee: iam.IGrantable) -> None:
        """Query of a job's events (GET /v1/jobs/{id}/output, a follow's replay), nothing else."""
        grants.grant_table(self.table, grantee, ["Query"])

    def _pusher(self, config: StageConfig, factory: FunctionFactory, realtime: Realtime) -> lambda_.Function:
        pusher = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.OUTPUT_PUSHER,
                layer=API_LAYER,
                environment=output_pusher_environment(
                    connections_table=realtime.connections_table.table_name,
                    connections_endpoint=realtime.stage.callback_url,
                ),
                timeout=Duration.seconds(60),
                memory_mb=256,
                description="outlast output pusher: output events -> the connections that follow their jobs",
                other_star_resources=_LIST_STREAMS_REASON,
                # Asynchronous, like the notifier: traced.
                traced=True,
            ),
        )
        # Followers (a Query of the job's follow partition) and gone ones forgotten (DeleteItem).
        grants.grant_table(realtime.connections_table, pusher, ["Query", "DeleteItem"])
        grants.grant_manage_connections(realtime.web_socket_api, WEBSOCKET_STAGE_NAME, pusher, "POST")
        pusher.add_event_source(
            guarded_stream_source(
                self.table,
                failures=self.pusher_failures,
                # Followers catch up with a replay when they follow: the pusher serves those connected now.
                starting_position=lambda_.StartingPosition.LATEST,
                batch_size=OUTPUT_PUSHER_BATCH_SIZE,
                retry_attempts=OUTPUT_PUSHER_RETRY_ATTEMPTS,
                max_record_age_seconds=OUTPUT_PUSHER_MAX_RECORD_AGE_SECONDS,
                pattern={"eventName": lambda_.FilterRule.is_equal("INSERT")},
            )
        )
        nag.acknowledge(
            self.pusher_failures,
            "AwsSolutions-SQS3",
            "This queue is itself a dead-letter destination: the on-failure destination of the output "
            "pusher's stream mapping, holding batch metadata for the output-pusher-failures alarm. Nothing "
            "consumes it; followers that missed events read them from GET /v1/jobs/{id}/output.",
        )
        return pusher
