"""The HTTP API: an authorizer on every route, the five routes, CORS, access logs, throttling."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Annotations, Match

from infra.names import (
    API,
    AUTH,
    BUDGETS,
    CLI_CLIENT,
    CONSOLE_CLIENT,
    CORS_ALLOW_HEADERS,
    CORS_EXPOSE_HEADERS,
    DOCUMENTS,
    HTTP_API,
    REALTIME,
    ROUTES,
    USER_POOL,
    USER_POOL_CLIENT,
    FunctionName,
)

pytestmark = pytest.mark.infra


def test_every_route_requires_the_jwt_authorizer(synthesized):
    # Given the synthesized routes
    routes = synthesized.of_api("AWS::ApiGatewayV2::Route", API, HTTP_API)
    (authorizer_id,) = synthesized.of_api("AWS::ApiGatewayV2::Authorizer", API, HTTP_API)

    # Then each one is JWT-authorized by the one Cognito authorizer, none is open
    assert routes
    for route in routes.values():
        assert route["Properties"]["AuthorizationType"] == "JWT"
        assert route["Properties"]["AuthorizerId"] == {"Ref": authorizer_id}


def test_the_twelve_routes_exist_and_nothing_else(synthesized):
    routes = synthesized.of_api("AWS::ApiGatewayV2::Route", API, HTTP_API)
    keys = {r["Properties"]["RouteKey"] for r in routes.values()}

    assert keys == {route.key for route in ROUTES}
    assert {"POST /v1/realtime/tickets", "GET /v1/budget", "GET /v1/jobs/{jobId}/output"} <= keys
    assert {
        "POST /v1/documents",
        "GET /v1/documents/{documentId}",
        "DELETE /v1/documents/{documentId}",
    } <= keys
    assert len(ROUTES) == 12


def test_authorizer_accepts_id_tokens_of_the_api_the_cli_and_the_console_clients(synthesized):
    pool = synthesized.logical_id(AUTH, USER_POOL)
    client = synthesized.logical_id(AUTH, USER_POOL, USER_POOL_CLIENT)
    cli = synthesized.logical_id(AUTH, USER_POOL, CLI_CLIENT)
    console = synthesized.logical_id(AUTH, USER_POOL, CONSOLE_CLIENT)

    synthesized.template.has_resource_properties(
        "AWS::ApiGatewayV2::Authorizer",
        {
            "AuthorizerType": "JWT",
            "IdentitySource": ["$request.header.Authorization"],
            "JwtConfiguration": {
                "Issuer": {"Fn::GetAtt": [pool, "ProviderURL"]},
                "Audience": [{"Ref": client}, {"Ref": cli}, {"Ref": console}],
            },
        },
    )


def test_routes_go_to_their_functions_with_payload_format_2(synthesized):
    integrations = synthesized.of_api("AWS::ApiGatewayV2::Integration", API, HTTP_API)
    homes = {FunctionName.TICKETS: REALTIME, FunctionName.BUDGET: BUDGETS, FunctionName.DOCUMENTS: DOCUMENTS}
    functions = {
        name: synthesized.logical_id(homes.get(name, API), f"{name.construct_id}Function")
        for name in {r.function for r in ROUTES}
    }

    targets = {i["Properties"]["IntegrationUri"]["Fn::GetAtt"][0] for i in integrations.values()}
    assert targets == set(functions.values())
    for integration in integrations.values():
        assert integration["Properties"]["PayloadFormatVersion"] == "2.0"
        assert integration["Properties"]["IntegrationType"] == "AWS_PROXY"


def test_cors_allows_the_idempotency_key_and_exposes_the_async_headers(synthesized):
    synthesized.template.has_resource_properties(
        "AWS::ApiGatewayV2::Api",
        {
            "ProtocolType": "HTTP",
            "CorsConfiguration": Match.object_like(
                {
                    "AllowHeaders": list(CORS_ALLOW_HEADERS),
                    "ExposeHeaders": list(CORS_EXPOSE_HEADERS),
                }
            ),
        },
    )


def test_without_a_console_origin_cors_allows_no_origin_and_synth_says_how_to_set_one(synthesized):
    # Given a stage with neither consoleOrigin nor corsAllowedOrigins (the default synth)
    (api,) = [
        resource
        for resource in synthesized.of_type("AWS::ApiGatewayV2::Api").values()
        if resource["Properties"].get("ProtocolType") == "HTTP"
    ]

    # Then the API's CORS allows no origin at all, never any (`*`)
    assert api["Properties"]["CorsConfiguration"].get("AllowOrigins", []) == []
    # ... and the synth says so, naming the key that sets one
    notes = Annotations.from_stack(synthesized.stack).find_info("*", Match.string_like_regexp("CORS"))
    assert len(notes) == 1
    assert "-c consoleOrigin=" in str(notes[0].entry.data)


def test_default_stage_logs_json_and_throttles(synthesized):
    (stage,) = synthesized.of_api("AWS::ApiGatewayV2::Stage", API, HTTP_API).values()
    properties = stage["Properties"]

    assert properties["StageName"] == "$default"
    assert properties["AutoDeploy"] is True
    log_format = json.loads(properties["AccessLogSettings"]["Format"])
    for field in ("requestId", "ip", "routeKey", "status", "integrationErrorMessage"):
        assert field in log_format
    assert "DestinationArn" in properties["AccessLogSettings"]
    throttling = properties["DefaultRouteSettings"]
    assert throttling["ThrottlingRateLimit"] > 0
    assert throttling["ThrottlingBurstLimit"] >= throttling["ThrottlingRateLimit"]


def test_user_pool_is_admin_only_with_a_strong_password_policy(synthesized):
    synthesized.template.has_resource_properties(
        "AWS::Cognito::UserPool",
        {
            "AdminCreateUserConfig": {"AllowAdminCreateUserOnly": True},
            "Policies": {
                "PasswordPolicy": Match.object_like(
                    {
                        "MinimumLength": 12,
                        "RequireLowercase": True,
                        "RequireUppercase": True,
                        "RequireNumbers": True,
                        "RequireSymbols": True,
                    }
                )
            },
            "Schema": Match.array_with([Match.object_like({"Name": "tenant", "Mutable": True})]),
        },
    )


def test_app_client_reads_but_cannot_write_the_tenant(synthesized):
    properties = synthesized.resources[synthesized.logical_id(AUTH, USER_POOL, USER_POOL_CLIENT)][
        "Properties"
    ]

    assert "custom:tenant" in properties["ReadAttributes"]
    assert "custom:tenant" not in properties.get("WriteAttributes", [])
    assert properties["GenerateSecret"] is False
    assert properties["IdTokenValidity"] == 60
    assert set(properties["ExplicitAuthFlows"]) == {
        "ALLOW_USER_PASSWORD_AUTH",
        "ALLOW_USER_SRP_AUTH",
        "ALLOW_ADMIN_USER_PASSWORD_AUTH",
        "ALLOW_REFRESH_TOKEN_AUTH",
    }
