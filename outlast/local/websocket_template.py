"""The WebSocket API of the synthesized template, read for local mode.

Routes, the REQUEST authorizer, integrations, route responses and the route selection expression
come from the template's AWS::ApiGatewayV2 resources of the API whose ProtocolType is WEBSOCKET.

The stage's URLs: the template builds them from the API's id in AWS form
(`wss://<id>.execute-api.<region>.amazonaws.com/<stage>` and the `https://` callback URL). Local
mode resolves those two host names the way DNS would in AWS: a function environment value that
starts with one of them is pointed at the local WebSocket front or management API instead
(`local_urls`). So the notifier's boto3 client gets the local `@connections` endpoint through its
resolved `endpoint_url`, never moto's stub.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from outlast.local.template import REGION, Resolver, Resource, Template
from outlast.local.websocket_front import RequestAuthorizer, WebSocketConfig, WebSocketRoute

Invoke = Callable[[dict[str, Any]], Any]


def websocket_api(template: Template) -> Resource | None:
    """The template's WebSocket API (outlast has one), or None."""
    for api in template.resources("AWS::ApiGatewayV2::Api"):
        if api.properties.get("ProtocolType") == "WEBSOCKET":
            return api
    return None


def of_api(template: Template, resource_type: str, api: Resource) -> list[Resource]:
    """The resources of one AWS::ApiGatewayV2 type that belong to `api` (by their ApiId Ref)."""
    return [
        r for r in template.resources(resource_type) if r.properties.get("ApiId") == {"Ref": api.logical_id}
    ]


def stage_name(template: Template, api: Resource) -> str:
    """The name of the API's (one) stage."""
    stages = of_api(template, "AWS::ApiGatewayV2::Stage", api)
    if not stages:
        raise RuntimeError(f"the WebSocket API {api.logical_id} has no stage")
    return str(stages[0].properties["StageName"])


def local_urls(
    resolver: Resolver, api: Resource, stage: str, websocket_url: str, callback_url: str
) -> dict[str, str]:
    """AWS-form stage URLs (as the template resolves them here) -> the local ones."""
    host = f"{resolver.ref(api.logical_id)}.execute-api.{REGION}.{resolver.pseudo('AWS::URLSuffix')}"
    return {f"wss://{host}/{stage}": websocket_url, f"https://{host}/{stage}": callback_url}


def localize(value: str, urls: dict[str, str]) -> str:
    """`value` with an AWS-form stage URL prefix replaced by its local URL."""
    for aws, local in urls.items():
        if value == aws or value.startswith((f"{aws}/", f"{aws}?")):
            return local + value[len(aws) :]
    return value


def _function_arn(uri: str) -> str:
    found = re.search(r"arn:aws:lambda:[^/]+:function:[^/]+?(?=/invocations|$)", uri)
    return found.group(0) if found else uri


def _target_id(raw: Any) -> str:
    if isinstance(raw, dict) and "Fn::Join" in raw:
        for part in raw["Fn::Join"][1]:
            if isinstance(part, dict) and "Ref" in part:
                return str(part["Ref"])
    return str(raw).removeprefix("integrations/")


def websocket_config(
    template: Template, resolver: Resolver, api: Resource, invoker: Callable[[str], Invoke], api_id: str
) -> WebSocketConfig:
    """The front's configuration: each route to its integration's function, the authorizer of $connect."""
    integrations = {
        r.logical_id: _function_arn(str(resolver.resolve(r.properties.get("IntegrationUri", ""))))
        for r in of_api(template, "AWS::ApiGatewayV2::Integration", api)
    }
    authorizers = {
        r.logical_id: RequestAuthorizer(
            invoke=invoker(_function_arn(str(resolver.resolve(r.properties["AuthorizerUri"])))),
            identity_sources=tuple(str(s) for s in r.properties.get("IdentitySource", [])),
        )
        for r in of_api(template, "AWS::ApiGatewayV2::Authorizer", api)
        if r.properties.get("AuthorizerType") == "REQUEST"
    }
    with_response = {
        str(r.properties["RouteId"]["Ref"]) for r in of_api(template, "AWS::ApiGatewayV2::RouteResponse", api)
    }
    routes: dict[str, WebSocketRoute] = {}
    authorizer: RequestAuthorizer | None = None
    for route in of_api(template, "AWS::ApiGatewayV2::Route", api):
        key = str(route.properties["RouteKey"])
        function_arn = integrations[_target_id(route.properties.get("Target"))]
        routes[key] = WebSocketRoute(
            key, invoker(function_arn), returns_response=route.logical_id in with_response
        )
        if route.properties.get("AuthorizationType") == "CUSTOM":
            reference = route.properties.get("AuthorizerId", {})
            authorizer = authorizers.get(reference.get("Ref", "")) if isinstance(reference, dict) else None
            if authorizer is None:
                raise RuntimeError(f"route {key} names an authorizer local mode cannot find")
    expression = str(api.properties.get("RouteSelectionExpression", ""))
    selection = re.fullmatch(r"\$request\.body\.(\w+)", expression)
    return WebSocketConfig(
        api_id=api_id,
        stage=stage_name(template, api),
        routes=routes,
        authorizer=authorizer,
        selection_key=selection.group(1) if selection else None,
    )
