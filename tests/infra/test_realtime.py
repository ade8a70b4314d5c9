"""Live updates: the WebSocket API's routes and authorizer, the notifier's mapping, the store, roles."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.config import NOTIFIER_MAX_RECORD_AGE_SECONDS, NOTIFIER_RETRY_ATTEMPTS
from infra.names import (
    CONNECTIONS_TABLE,
    JOBS_TABLE,
    NOTIFIER_FAILURE_QUEUE,
    OUTBOX,
    REALTIME,
    STORAGE,
    STREAMING,
    TICKET_IDENTITY_SOURCE,
    WEBSOCKET_API,
    WEBSOCKET_STAGE,
    WEBSOCKET_STAGE_NAME,
    FunctionName,
    Output,
)
from shared import resources as r

pytestmark = pytest.mark.infra


def _function_id(synthesized, name: FunctionName) -> str:
    return str(synthesized.logical_id(REALTIME, f"{name.construct_id}Function"))


def _integration_target(synthesized, route: dict[str, Any]) -> str:
    (ref,) = [p["Ref"] for p in route["Properties"]["Target"]["Fn::Join"][1] if isinstance(p, dict)]
    integration = synthesized.resources[ref]["Properties"]
    assert integration["IntegrationType"] == "AWS_PROXY"
    parts = integration["IntegrationUri"]["Fn::Join"][1]
    (function,) = [p["Fn::GetAtt"][0] for p in parts if isinstance(p, dict) and "Fn::GetAtt" in p]
    return str(function)


def _routes(synthesized) -> dict[str, dict[str, Any]]:
    routes = synthesized.of_api("AWS::ApiGatewayV2::Route", REALTIME, WEBSOCKET_API)
    return {route["Properties"]["RouteKey"]: route for route in routes.values()}


def test_the_websocket_api_has_the_five_routes_and_their_functions(synthesized):
    (api,) = [
        a
        for a in synthesized.of_type("AWS::ApiGatewayV2::Api").values()
        if a["Properties"]["ProtocolType"] == "WEBSOCKET"
    ]
    routes = _routes(synthesized)

    assert api["Properties"]["RouteSelectionExpression"] == "$request.body.action"
    assert set(routes) == {"$connect", "$disconnect", "$default", "follow", "unfollow"}
    assert _integration_target(synthesized, routes["$connect"]) == _function_id(
        synthesized, FunctionName.WS_CONNECTIONS
    )
    assert _integration_target(synthesized, routes["$disconnect"]) == _function_id(
        synthesized, FunctionName.WS_CONNECTIONS
    )
    assert _integration_target(synthesized, routes["$default"]) == _function_id(
        synthesized, FunctionName.WS_MESSAGES
    )
    follow_function = str(synthesized.logical_id(STREAMING, f"{FunctionName.WS_FOLLOW.construct_id}Function"))
    for follow in ("follow", "unfollow"):
        assert _integration_target(synthesized, routes[follow]) == follow_function


def test_connect_is_behind_the_ticket_authorizer_on_the_ticket_query_parameter(synthesized):
    routes = _routes(synthesized)
    (authorizer_id, authorizer) = next(
        iter(synthesized.of_api("AWS::ApiGatewayV2::Authorizer", REALTIME, WEBSOCKET_API).items())
    )
    properties = authorizer["Properties"]

    assert routes["$connect"]["Properties"]["AuthorizationType"] == "CUSTOM"
    assert routes["$connect"]["Properties"]["AuthorizerId"] == {"Ref": authorizer_id}
    assert properties["AuthorizerType"] == "REQUEST"
    assert properties["IdentitySource"] == [TICKET_IDENTITY_SOURCE] == ["route.request.querystring.ticket"]
    uri = properties["AuthorizerUri"]["Fn::Join"][1]
    assert {"Fn::GetAtt": [_function_id(synthesized, FunctionName.WS_AUTHORIZER), "Arn"]} in uri
    # Only $connect can carry an authorizer in a WebSocket API.
    assert routes["$disconnect"]["Properties"]["AuthorizationType"] == "NONE"
    assert routes["$default"]["Properties"]["AuthorizationType"] == "NONE"


def test_default_follow_and_unfollow_have_a_route_response_so_their_answer_reaches_the_client(synthesized):
    routes = _routes(synthesized)
    responses = synthesized.of_api("AWS::ApiGatewayV2::RouteResponse", REALTIME, WEBSOCKET_API).values()
    route_ids = {key: next(k for k, v in synthesized.resources.items() if v is routes[key]) for key in routes}

    answered = {response["Properties"]["RouteId"]["Ref"] for response in responses}
    assert answered == {route_ids[key] for key in ("$default", "follow", "unfollow")}
    for response in responses:
        assert response["Properties"]["RouteResponseKey"] == "$default"
    for key in ("$default", "follow", "unfollow"):
        assert routes[key]["Properties"]["RouteResponseSelectionExpression"] == "$default"


def test_the_stage_logs_json_without_the_query_string_and_throttles(synthesized):
    (stage,) = synthesized.of_api("AWS::ApiGatewayV2::Stage", REALTIME, WEBSOCKET_API).values()
    properties = stage["Properties"]

    assert properties["StageName"] == WEBSOCKET_STAGE_NAME
    assert properties["AutoDeploy"] is True
    log_format = properties["AccessLogSettings"]["Format"]
    assert {"requestId", "eventType", "routeKey", "connectionId", "status"} <= set(json.loads(log_format))
    assert "querystring" not in log_format.lower()
    assert "ticket" not in log_format.lower()
    assert "LoggingLevel" not in json.dumps(properties)  # no execution logs: they would hold the request
    assert properties["DefaultRouteSettings"]["ThrottlingRateLimit"] > 0


def _notifier_mapping(synthesized) -> Any:
    notifier = _function_id(synthesized, FunctionName.NOTIFIER)
    (mapping,) = [
        m["Properties"]
        for m in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": notifier}
    ]
    return mapping


def test_the_notifier_reads_job_writes_except_heartbeats_and_deferrals(synthesized):
    mapping = _notifier_mapping(synthesized)

    assert mapping["EventSourceArn"] == {
        "Fn::GetAtt": [synthesized.logical_id(STORAGE, JOBS_TABLE), "StreamArn"]
    }
    assert mapping["StartingPosition"] == "LATEST"
    (criteria,) = mapping["FilterCriteria"]["Filters"]
    assert json.loads(criteria["Pattern"]) == {
        "eventName": ["INSERT", "MODIFY"],
        "dynamodb": {
            "NewImage": {
                r.TYPE_ATTRIBUTE: {"S": [r.JOB_ITEM_TYPE]},
                r.WRITE_KIND_ATTRIBUTE: {"S": [{"anything-but": ["defer", "heartbeat"]}]},
            }
        },
    }


def test_the_notifier_bisects_retries_a_little_and_keeps_failures_on_its_own_queue(synthesized):
    mapping = _notifier_mapping(synthesized)

    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRetryAttempts"] == NOTIFIER_RETRY_ATTEMPTS == 2
    assert mapping["MaximumRecordAgeInSeconds"] == NOTIFIER_MAX_RECORD_AGE_SECONDS
    assert mapping["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": [synthesized.logical_id(REALTIME, NOTIFIER_FAILURE_QUEUE), "Arn"]
    }


def test_the_jobs_stream_has_exactly_two_consumers_the_relay_and_the_notifier(synthesized):
    stream = {"Fn::GetAtt": [synthesized.logical_id(STORAGE, JOBS_TABLE), "StreamArn"]}
    consumers = {
        m["Properties"]["FunctionName"]["Ref"]
        for m in synthesized.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == stream
    }

    assert consumers == {
        synthesized.logical_id(OUTBOX, "RelayFunction"),
        _function_id(synthesized, FunctionName.NOTIFIER),
    }


def test_the_management_endpoint_is_the_stages_callback_url_from_the_template(synthesized):
    api = synthesized.logical_id(REALTIME, WEBSOCKET_API)
    callback = {
        "Fn::Join": [
            "",
            [
                "https://",
                {"Ref": api},
                ".execute-api.",
                {"Ref": "AWS::Region"},
                ".",
                {"Ref": "AWS::URLSuffix"},
                "/live",
            ],
        ]
    }
    for name in (FunctionName.NOTIFIER, FunctionName.WS_CONNECTIONS):
        variables = synthesized.resources[_function_id(synthesized, name)]["Properties"]["Environment"][
            "Variables"
        ]
        assert variables[r.ENV_CONNECTIONS_ENDPOINT] == callback
    tickets = synthesized.resources[_function_id(synthesized, FunctionName.TICKETS)]["Properties"]
    assert tickets["Environment"]["Variables"][r.ENV_WEBSOCKET_URL]["Fn::Join"][1][0] == "wss://"


def _manage_connections_resources(synthesized, name: FunctionName) -> list[str]:
    role = synthesized.logical_id(REALTIME, f"{name.construct_id}Role")
    found = []
    for policy in synthesized.of_type("AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Action"] == "execute-api:ManageConnections":
                parts = statement["Resource"]["Fn::Join"][1]
                found.append(
                    "".join(p if isinstance(p, str) else f"<{next(iter(p.values()))}>" for p in parts)
                )
    return found


@pytest.mark.parametrize(
    ("name", "method"), [(FunctionName.NOTIFIER, "POST"), (FunctionName.WS_CONNECTIONS, "DELETE")]
)
def test_manage_connections_is_granted_on_this_stages_connections_for_one_method(synthesized, name, method):
    api = synthesized.logical_id(REALTIME, WEBSOCKET_API)

    assert _manage_connections_resources(synthesized, name) == [
        f"arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<{api}>/{WEBSOCKET_STAGE_NAME}"
        f"/{method}/@connections/*"
    ]


def test_no_other_role_may_manage_connections(synthesized):
    for name in (FunctionName.TICKETS, FunctionName.WS_AUTHORIZER, FunctionName.WS_MESSAGES):
        assert _manage_connections_resources(synthesized, name) == []


def test_the_connections_table_expires_items_and_is_recoverable_and_encrypted(synthesized):
    table = synthesized.resources[synthesized.logical_id(REALTIME, CONNECTIONS_TABLE)]["Properties"]

    assert table["TimeToLiveSpecification"] == {"AttributeName": r.TTL_ATTRIBUTE, "Enabled": True}
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["SSESpecification"]["SSEEnabled"] is True
    assert [k["AttributeName"] for k in table["KeySchema"]] == [
        r.CONNECTIONS_PARTITION_KEY,
        r.CONNECTIONS_SORT_KEY,
    ]
    assert "StreamSpecification" not in table


def test_the_websocket_url_is_a_stack_output(synthesized):
    outputs = synthesized.template.to_json()["Outputs"]

    assert outputs[Output.WEBSOCKET_URL.value]["Value"]["Fn::Join"][1][0] == "wss://"
    assert synthesized.logical_id(REALTIME, WEBSOCKET_STAGE)
