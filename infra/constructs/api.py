"""The HTTP API: JWT authorizer (Cognito ID tokens) on every route, submit and status functions.

HTTP API rather than REST API: 3.5x cheaper per request and lower latency (DESIGN.md, "Shape").
Payload format 2.0. The default stage logs every request as one JSON line (no bodies, no
tokens) and throttles the whole API; the functions throttle submits per owner on top.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import jsii
from aws_cdk import Annotations, Duration, IStableListProducer, Lazy
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra import grants, nag
from infra.config import StageConfig
from infra.constructs.auth import Auth
from infra.constructs.budgets import Budgets
from infra.constructs.documents import Documents
from infra.constructs.storage import Storage
from infra.constructs.streaming import Streaming
from infra.environment import status_environment, submit_environment
from infra.function_factory import FunctionFactory, FunctionSpec, removal_policy, retention
from infra.names import CORS_ALLOW_HEADERS, CORS_EXPOSE_HEADERS, CURSOR_SECRET, HTTP_API, ROUTES, FunctionName
from infra.packaging import API_LAYER
from shared import resources as r

# One JSON line per request: who, what, how it ended. No headers, bodies or tokens.
ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "path": "$context.path",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
    "integrationStatus": "$context.integrationStatus",
    "integrationErrorMessage": "$context.integrationErrorMessage",
    "authorizerError": "$context.authorizer.error",
    "errorMessage": "$context.error.message",
    "sub": "$context.authorizer.claims.sub",
}

# API Gateway's own limit for an HTTP API integration is 30 s; these functions answer in milliseconds.
_API_FUNCTION_TIMEOUT = Duration.seconds(10)
_METHODS = {
    "GET": apigwv2.HttpMethod.GET,
    "POST": apigwv2.HttpMethod.POST,
    "DELETE": apigwv2.HttpMethod.DELETE,
}


class Api(Construct):
    """HTTP API with a default JWT authorizer, its access log, and the submit and status functions."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StageConfig,
        factory: FunctionFactory,
        auth: Auth,
        storage: Storage,
        budgets: Budgets,
        streaming: Streaming,
        documents: Documents,
        route_functions: Mapping[FunctionName, lambda_.Function] | None = None,
    ) -> None:
        """`route_functions`: functions other capabilities made for routes of ROUTES (tickets, budget,
        documents)."""
        super().__init__(scope, construct_id)
        # Signs list cursors (HMAC), so clients cannot forge a position in another owner's list.
        self.cursor_secret = secretsmanager.Secret(
            self,
            CURSOR_SECRET,
            description="outlast: HMAC key that signs list cursors",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
            removal_policy=removal_policy(config),
        )
        self.functions = {
            FunctionName.SUBMIT: self._submit(config, factory, storage, budgets, documents),
            FunctionName.STATUS: self._status(config, factory, storage, budgets, streaming),
            **(route_functions or {}),
        }
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=retention(config.log_retention_days),
            removal_policy=removal_policy(config),
        )
        # The app clients whose ID tokens the authorizer accepts: the API's own, and the console's
        # (`accept_audience`, called by the console construct, which is built after the API).
        self._audiences = [auth.client.user_pool_client_id, auth.cli_client.user_pool_client_id]
        self.http_api = apigwv2.HttpApi(
            self,
            HTTP_API,
            description="outlast: durable LLM jobs",
            create_default_stage=False,
            default_authorizer=authorizers.HttpJwtAuthorizer(
                "CognitoAuthorizer",
                jwt_issuer=auth.user_pool.user_pool_provider_url,
                jwt_audience=Lazy.list(_Audiences(self._audiences)),
                identity_source=["$request.header.Authorization"],
            ),
            # The console's origin and any listed ones; none until one is set (never `*`). The
            # configuration stays when empty: API Gateway then answers preflights allowing nothing,
            # and local mode puts its console's origin in its place.
            cors_preflight=apigwv2.CorsPreflightOptions(
                allow_origins=list(config.api_cors_origins),
                allow_methods=[
                    apigwv2.CorsHttpMethod.GET,
                    apigwv2.CorsHttpMethod.POST,
                    apigwv2.CorsHttpMethod.DELETE,
                ],
                allow_headers=list(CORS_ALLOW_HEADERS),
                expose_headers=list(CORS_EXPOSE_HEADERS),
                max_age=Duration.hours(1),
            ),
        )
        self.stage = self.http_api.add_stage(
            "DefaultStage",
            stage_name="$default",
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=config.api_throttle_rate_limit, burst_limit=config.api_throttle_burst_limit
            ),
            access_log_settings=_AccessLogs(self.access_logs),
        )
        self._routes()
        if not config.api_cors_origins:
            # An info, as the console's note was: a warning would be a finding of the synth's
            # validation report, and a stage may mean to have no browser clients.
            Annotations.of(self).add_info(
                "The API's CORS allows no origin, so no browser page (the web console included) can "
                "call it. After the first deploy, deploy again with -c consoleOrigin=<the ConsoleUrl "
                "output without its trailing slash> (or set it beforehand to the console's own "
                "domain); list other browser origins in corsAllowedOrigins (docs/deploy.md).",
            )

    def accept_audience(self, client_id: str) -> None:
        """Accept ID tokens of another app client on every route (the ticket route included)."""
        self._audiences.append(client_id)

    def _submit(
        self,
        config: StageConfig,
        factory: FunctionFactory,
        storage: Storage,
        budgets: Budgets,
        documents: Documents,
    ) -> lambda_.Function:
        function = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.SUBMIT,
                layer=API_LAYER,
                environment=submit_environment(
                    config,
                    jobs_table=storage.jobs_table.table_name,
                    idempotency_table=storage.idempotency_table.table_name,
                    bucket=storage.payload_bucket.bucket_name,
                    budgets_table=budgets.table.table_name,
                    documents_table=documents.table.table_name,
                    documents_bucket=documents.bucket.bucket_name,
                ),
                timeout=_API_FUNCTION_TIMEOUT,
                memory_mb=config.api_memory_mb,
                description="outlast submit: POST /v1/jobs",
                traced=config.api_tracing,
            ),
        )
        # The job and its input item (conditional PutItem, GetItem on replay).
        grants.grant_table(storage.jobs_table, function, ["PutItem", "GetItem"])
        # Idempotency claims (conditional PutItem; GetItem when a model the allowlist no longer
        # names may still replay its job; a conditional DeleteItem of its own claim when the submit
        # is refused at the rate limit or the budget, so that a retry starts fresh) and per-owner
        # submit counters (UpdateItem).
        grants.grant_table(
            storage.idempotency_table, function, ["PutItem", "GetItem", "UpdateItem", "DeleteItem"]
        )
        grants.grant_objects(storage.payload_bucket, function, ["PutObject"], [r.INPUT_PREFIX])
        # The tenant's limit and counter (BatchGetItem), then the reservation with its counter: a
        # TransactWriteItems of a Put and an Update, which IAM authorizes as PutItem and UpdateItem.
        grants.grant_table(budgets.table, function, ["BatchGetItem", "PutItem", "UpdateItem"])
        # Jobs on documents: the caller's document, its text, and the pin (DESIGN.md, "Documents").
        documents.grant_job_input(function)
        return function

    def _status(
        self,
        config: StageConfig,
        factory: FunctionFactory,
        storage: Storage,
        budgets: Budgets,
        streaming: Streaming,
    ) -> lambda_.Function:
        function = factory.create(
            self,
            FunctionSpec(
                name=FunctionName.STATUS,
                layer=API_LAYER,
                environment=status_environment(
                    config,
                    jobs_table=storage.jobs_table.table_name,
                    idempotency_table=storage.idempotency_table.table_name,
                    bucket=storage.payload_bucket.bucket_name,
                    cursor_secret_arn=self.cursor_secret.secret_arn,
                    budgets_table=budgets.table.table_name,
                    output_events_table=streaming.table.table_name,
                ),
                timeout=_API_FUNCTION_TIMEOUT,
                memory_mb=config.api_memory_mb,
                description="outlast status: status, result, output, list and cancel",
                traced=config.api_tracing,
            ),
        )
        # Reads (GetItem), the owner's list (Query on the list index, then BatchGetItem of the jobs it
        # found), cancellation (UpdateItem).
        grants.grant_table(
            storage.jobs_table,
            function,
            ["GetItem", "BatchGetItem", "Query", "UpdateItem"],
            indexes=[r.LIST_INDEX],
        )
        grants.grant_objects(storage.payload_bucket, function, ["GetObject"], [r.RESULT_PREFIX])
        grants.grant_missing_objects_as_404(storage.payload_bucket, function)
        grants.grant_secret_value(self.cursor_secret, function)
        # Whether an ended job's reservation is settled yet (keys only, one BatchGetItem per page).
        grants.grant_table(budgets.table, function, ["BatchGetItem"])
        # A streaming job's output events (GET /v1/jobs/{id}/output).
        streaming.grant_read_events(function)
        nag.acknowledge(
            self.cursor_secret,
            "AwsSolutions-SMG4",
            "The cursor key only signs list cursors, which are short-lived page positions: rotating it "
            "(put-secret-value with a new random value) merely invalidates the cursors clients hold, "
            "who then list from the first page. Operators rotate it on suspicion of exposure.",
        )
        return function

    def _routes(self) -> None:
        integrations_by_function = {
            name: integrations.HttpLambdaIntegration(
                f"{name.construct_id}Integration",
                function,
                payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
            )
            for name, function in self.functions.items()
        }
        for route in ROUTES:
            self.http_api.add_routes(
                path=route.path,
                methods=[_METHODS[route.method]],
                integration=integrations_by_function[route.function],
            )


@jsii.implements(IStableListProducer)
class _Audiences:
    """The authorizer's audience list, read at synth (after every construct had its say)."""

    def __init__(self, audiences: list[str]) -> None:
        self._audiences = audiences

    def produce(self) -> list[str]:
        """The client ids, in the order they were added."""
        return list(self._audiences)


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogs:
    """IAccessLogSettings for the stage: the log group and the JSON line format."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        """The stage's access log group."""
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        """One JSON object per request (ACCESS_LOG_FORMAT)."""
        return apigw.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FORMAT, separators=(",", ":")))
