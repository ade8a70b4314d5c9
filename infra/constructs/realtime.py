"""Live updates (DESIGN.md, "Live updates: WebSocket push"): tickets, the WebSocket API, the notifier.

- The connections table holds tickets (by SHA-256, 60 s) and open connections (by owner, 2 h),
  TTL on both; point-in-time recovery and the AWS managed key like the other tables.
- The tickets function serves `POST /v1/realtime/tickets` on the HTTP API (the Api construct adds
  the route; its JWT authorizer applies).
- An API Gateway WebSocket API on one stage: `$connect` behind a Lambda REQUEST authorizer whose
  identity source is the `ticket` query parameter (no ticket: API Gateway answers 401 without
  calling it; WebSocket authorizers have no result cache), `$disconnect`, and `$default` with a
  route response (the pong). The stage's access log has no query string, so no ticket.
- The notifier is the jobs stream's second and last consumer (the relay, in the Outbox, is the
  first; DynamoDB Streams serves at most two readers per shard). Its event source filter passes
  INSERTs and MODIFYs of job items whose `w` is not heartbeat or defer, so most writes of a
  running job never invoke it. Failures are bisected, retried a few times, then described
  (metadata only) on its own queue, for the alarm.
- Roles: the authorizer may only take tickets (DeleteItem); $connect/$disconnect record, read and
  forget connections and may close (DELETE) connections of this stage; the notifier reads the
  jobs stream, reads and forgets connections and may post (POST) to this stage's connections;
  the $default function may do nothing but log. The Webhooks construct grants the notifier its
  part of webhooks (the tenant index of endpoints, sending to the webhooks queue).
- The stage's URL and callback URL reach the functions through their environment, from this
  template: the management API's endpoint is never left to boto3's defaults.
"""

from __future__ import annotations

import json
from dataclasses import replace

import jsii
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra import capacity, grants, nag
from infra.config import (
    DLQ_RETENTION_DAYS,
    NOTIFIER_BATCH_SIZE,
    NOTIFIER_MAX_RECORD_AGE_SECONDS,
    NOTIFIER_RETRY_ATTEMPTS,
    StageConfig,
)
from infra.constructs.budgets import Budgets
from infra.constructs.documents import Documents
from infra.constructs.outbox import guarded_stream_source, secure_queue
from infra.constructs.storage import Storage
from infra.constructs.webhooks import Webhooks
from infra.environment import (
    notifier_environment,
    tickets_environment,
    ws_authorizer_environment,
    ws_connections_environment,
)
from infra.function_factory import FunctionFactory, FunctionSpec, removal_policy, retention
from infra.names import (
    CONNECTIONS_TABLE,
    NOTIFIER_FAILURE_QUEUE,
    TICKET_AUTHORIZER,
    TICKET_IDENTITY_SOURCE,
    WEBSOCKET_API,
    WEBSOCKET_STAGE,
    WEBSOCKET_STAGE_NAME,
    FunctionName,
)
from infra.packaging import API_LAYER
from shared import resources as r
from shared.realtime import SILENT_WRITES

_STRING = dynamodb.AttributeType.STRING
_ROUTE_TIMEOUT = Duration.seconds(10)
# One JSON line per connect, message and disconnect: never the query string (it holds the ticket).
ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "eventType": "$context.eventType",
    "routeKey": "$context.routeKey",
    "connectionId": "$context.connectionId",
    "status": "$context.status",
    "integrationLatency": "$context.integrationLatency",
    "integrationErrorMessage": "$context.integrationErrorMessage",
    "authorizerError": "$context.authorizer.error",
    "errorMessage": "$context.error.message",
    "sub": "$context.authorizer.sub",
}
_LIST_STREAMS_REASON = (
    "The notifier's stream event source needs dynamodb:ListStreams, which supports no resource-level "
    "permissions (AWS requires Resource *); its other stream actions are limited to the jobs table's stream."
)
_UNAUTHORIZED_ROUTES_REASON = (
    "API Gateway allows an authorizer on a WebSocket API's $connect route only. $disconnect and $default "
    "can only be reached over a connection whose $connect passed the ticket authorizer, and they act only "
    "on that connection (forget it; answer a ping)."
)


class Realtime(Construct):
    """The connections table, the WebSocket API and its four functions, and the notifier."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        factory: FunctionFactory,
        storage: Storage,
        webhooks: Webhooks,
        budgets: Budgets,
        documents: Documents,
    ) -> None:
        super().__init__(scope, construct_id)
        self.connections_table = self._table(config)
        table = self.connections_table.table_name
        self.authorizer_function = self._function(
            factory,
            FunctionName.WS_AUTHORIZER,
            ws_authorizer_environment(connections_table=table),
            "outlast WebSocket $connect authorizer: one ticket, one connect",
            traced=config.api_tracing,
        )
        grants.grant_table(self.connections_table, self.authorizer_function, ["DeleteItem"])
        self.messages_function = self._function(
            factory,
            FunctionName.WS_MESSAGES,
            {},
            "outlast WebSocket $default: ping -> pong",
            traced=config.api_tracing,
        )
        # $connect/$disconnect need the stage's callback URL, which needs the API: the API is made
        # first, its routes once the function exists.
        self.web_socket_api = apigwv2.WebSocketApi(
            self, WEBSOCKET_API, description="outlast: live job updates, pushed to their owners"
        )
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=retention(config.log_retention_days),
            removal_policy=removal_policy(config),
        )
        self.stage = apigwv2.WebSocketStage(
            self,
            WEBSOCKET_STAGE,
            web_socket_api=self.web_socket_api,
            stage_name=WEBSOCKET_STAGE_NAME,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=config.api_throttle_rate_limit, burst_limit=config.api_throttle_burst_limit
            ),
            access_log_settings=_AccessLogs(self.access_logs),
        )
        self.connections_function = self._function(
            factory,
            FunctionName.WS_CONNECTIONS,
            ws_connections_environment(connections_table=table, connections_endpoint=self.stage.callback_url),
            "outlast WebSocket $connect/$disconnect: the owner's connections, at most 10",
            traced=config.api_tracing,
        )
        grants.grant_table(
            self.connections_table, self.connections_function, ["PutItem", "Query", "DeleteItem"]
        )
        grants.grant_manage_connections(
            self.web_socket_api, WEBSOCKET_STAGE_NAME, self.connections_function, "DELETE"
        )
        self._routes()
        self.tickets_function = self._function(
            factory,
            FunctionName.TICKETS,
            tickets_environment(connections_table=table, websocket_url=self.stage.url),
            "outlast tickets: POST /v1/realtime/tickets",
            traced=config.api_tracing,
        )
        grants.grant_table(self.connections_table, self.tickets_function, ["PutItem"])
        self.notifier_failures = secure_queue(
            self, NOTIFIER_FAILURE_QUEUE, retention_period=Duration.days(DLQ_RETENTION_DAYS)
        )
        self.notifier = self._notifier(
            factory, storage, table, webhooks, budgets_table=budgets.table.table_name, documents=documents
        )
        # Token budgets: each terminal write settles its run's reservation (functions.notifier.settlement),
        # a transaction of a conditional Delete (the reservation) and an Update (the counter).
        grants.grant_table(budgets.table, self.notifier, ["DeleteItem", "UpdateItem"])
        # Jobs on documents: each terminal write unpins its document (functions.notifier.settlement).
        documents.grant_unpin(self.notifier)
        self.functions = {
            FunctionName.TICKETS: self.tickets_function,
            FunctionName.WS_AUTHORIZER: self.authorizer_function,
            FunctionName.WS_CONNECTIONS: self.connections_function,
            FunctionName.WS_MESSAGES: self.messages_function,
            FunctionName.NOTIFIER: self.notifier,
        }

    def _table(self, config: StageConfig) -> dynamodb.Table:
        table = dynamodb.Table(
            self,
            CONNECTIONS_TABLE,
            partition_key=dynamodb.Attribute(name=r.CONNECTIONS_PARTITION_KEY, type=_STRING),
            sort_key=dynamodb.Attribute(name=r.CONNECTIONS_SORT_KEY, type=_STRING),
            **capacity.table_billing(config),
            time_to_live_attribute=r.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            # Tickets live 60 s and connections 2 h: nothing here outlives a stack worth keeping.
            removal_policy=RemovalPolicy.DESTROY,
        )
        capacity.auto_scale(table, config)
        return table

    def _function(
        self,
        factory: FunctionFactory,
        name: FunctionName,
        environment: dict[str, str],
        description: str,
        *,
        timeout: Duration = _ROUTE_TIMEOUT,
        other_star_resources: str | None = None,
        traced: bool,
    ) -> lambda_.Function:
        spec = FunctionSpec(
            name=name,
            layer=API_LAYER,
            environment=environment,
            timeout=timeout,
            memory_mb=256,
            description=description,
            traced=traced,
        )
        if other_star_resources is not None:
            spec = replace(spec, other_star_resources=other_star_resources)
        return factory.create(self, spec)

    def _routes(self) -> None:
        connections = integrations.WebSocketLambdaIntegration(
            "ConnectionsIntegration", self.connections_function
        )
        self.web_socket_api.add_route(
            "$connect",
            integration=connections,
            authorizer=authorizers.WebSocketLambdaAuthorizer(
                TICKET_AUTHORIZER, self.authorizer_function, identity_source=[TICKET_IDENTITY_SOURCE]
            ),
        )
        self.web_socket_api.add_route("$disconnect", integration=connections)
        self.web_socket_api.add_route(
            "$default",
            integration=integrations.WebSocketLambdaIntegration(
                "MessagesIntegration", self.messages_function
            ),
            return_response=True,
        )
        nag.acknowledge(self.web_socket_api, "AwsSolutions-APIG4", _UNAUTHORIZED_ROUTES_REASON)

    def _notifier(
        self,
        factory: FunctionFactory,
        storage: Storage,
        table: str,
        webhooks: Webhooks,
        *,
        budgets_table: str,
        documents: Documents,
    ) -> lambda_.Function:
        notifier = self._function(
            factory,
            FunctionName.NOTIFIER,
            notifier_environment(
                connections_table=table,
                connections_endpoint=self.stage.callback_url,
                webhooks_table=webhooks.table.table_name,
                webhooks_queue_url=webhooks.queue.queue_url,
                budgets_table=budgets_table,
                documents_table=documents.table.table_name,
            ),
            "outlast notifier: job writes on the jobs table stream -> their owners' WebSocket connections",
            timeout=Duration.seconds(60),
            other_star_resources=_LIST_STREAMS_REASON,
            # Asynchronous, like the relay: traced (the API-facing functions follow `apiTracing`).
            traced=True,
        )
        grants.grant_table(self.connections_table, notifier, ["Query", "DeleteItem"])
        grants.grant_manage_connections(self.web_socket_api, WEBSOCKET_STAGE_NAME, notifier, "POST")
        webhooks.grant_enqueue(notifier)
        notifier.add_event_source(
            guarded_stream_source(
                storage.jobs_table,
                failures=self.notifier_failures,
                # A push is for clients connected now: old records would reach no one who waits.
                starting_position=lambda_.StartingPosition.LATEST,
                batch_size=NOTIFIER_BATCH_SIZE,
                retry_attempts=NOTIFIER_RETRY_ATTEMPTS,
                max_record_age_seconds=NOTIFIER_MAX_RECORD_AGE_SECONDS,
                pattern=notifier_filter(),
            )
        )
        nag.acknowledge(
            self.notifier_failures,
            "AwsSolutions-SQS3",
            "This queue is itself a dead-letter destination: the on-failure destination of the notifier's "
            "stream mapping, holding batch metadata for the notifier-failures alarm. Nothing consumes it, so "
            "a further DLQ would never receive anything; clients that missed a push re-read their job.",
        )
        return notifier


def notifier_filter() -> dict[str, object]:
    """INSERT or MODIFY of a job item whose `w` (the kind of write) is not heartbeat or defer."""
    return {
        "eventName": lambda_.FilterRule.or_("INSERT", "MODIFY"),
        "dynamodb": {
            "NewImage": {
                r.TYPE_ATTRIBUTE: {"S": lambda_.FilterRule.is_equal(r.JOB_ITEM_TYPE)},
                r.WRITE_KIND_ATTRIBUTE: {"S": [{"anything-but": sorted(SILENT_WRITES)}]},
            }
        },
    }


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogs:
    """IAccessLogSettings for the WebSocket stage: the log group and the JSON line format."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        """The stage's access log group."""
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        """One JSON object per connect, message or disconnect (ACCESS_LOG_FORMAT)."""
        return apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FORMAT, separators=(",", ":")))
