"""The HTTP API, emulated: its routes, JWT authorizer, CORS and throttling, from the template.

Emulates infra/constructs/api.py (the HTTP API, its default stage's throttling, its routes to
the submit and status functions and every other construct's routes: realtime.py's tickets,
budgets.py's budget, webhooks.py's) and the JWT authorizer on auth.py's user pool, whose keys
come from moto's JWKS. outlast.local.http_front serves the routes as API Gateway does (payload
format 2.0, a 30 s integration timeout); the console's sign-in endpoints ride on the same front.
"""

from __future__ import annotations

from typing import Any

from outlast.local.capabilities.base import Starter
from outlast.local.capabilities.functions import Functions
from outlast.local.http_front import ApiConfig, ApiFront, Cors, LocalEndpoints, Route, TokenBucket
from outlast.local.jwt_auth import JwtAuthorizer, JwtVerifier
from outlast.local.template import Resolver, Resource, Template


class Api(Starter):
    """The HTTP front on the stack's port."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._front: ApiFront | None = None

    @property
    def front(self) -> ApiFront:
        """The HTTP front (after start)."""
        if self._front is None:
            raise RuntimeError("the HTTP API is not started")
        return self._front

    def start(
        self,
        template: Template,
        resolver: Resolver,
        *,
        functions: Functions,
        endpoint: str,
        console_origin: str | None,
        local: LocalEndpoints | None,
    ) -> Api:
        """Serve the template's HTTP API; `console_origin` replaces the template's CORS origins."""
        config = _Reader(template, resolver, endpoint).config(functions, console_origin, local)
        self._front = ApiFront(config, port=self._port).start()
        return self

    def stop_intake(self) -> None:
        if self._front is not None:
            self._front.stop()


class _Reader:
    """The HTTP API's resources in the template, read into the front's configuration."""

    def __init__(self, template: Template, resolver: Resolver, endpoint: str) -> None:
        self.template = template
        self.resolver = resolver
        self.endpoint = endpoint

    def config(
        self, functions: Functions, console_origin: str | None, local: LocalEndpoints | None
    ) -> ApiConfig:
        resolve = self.resolver.resolve
        apis = [
            a
            for a in self.template.resources("AWS::ApiGatewayV2::Api")
            if a.properties.get("ProtocolType", "HTTP") == "HTTP"
        ]
        api_id = apis[0].logical_id.lower()[:10] if apis else "local"
        http_api = {"Ref": apis[0].logical_id} if apis else None
        integrations = {
            r.logical_id: resolve(r.properties)
            for r in self.template.resources("AWS::ApiGatewayV2::Integration")
        }
        authorizers = {
            r.logical_id: self._verifier(resolve(r.properties))
            for r in self.template.resources("AWS::ApiGatewayV2::Authorizer")
            if r.properties.get("AuthorizerType") == "JWT"
        }
        routes = []
        for resource in self.template.resources("AWS::ApiGatewayV2::Route"):
            properties = resource.properties
            if properties.get("ApiId") != http_api:
                continue  # the WebSocket API's routes: the realtime starter serves them
            target = str(resolve(properties.get("Target", "")))
            integration = integrations[_logical_id_from_target(target, properties.get("Target"))]
            authorizer_ref = properties.get("AuthorizerId", {})
            authorizer = (
                authorizers.get(authorizer_ref.get("Ref", "")) if isinstance(authorizer_ref, dict) else None
            )
            if properties.get("AuthorizationType") == "JWT" and authorizer is None:
                raise RuntimeError(
                    f"route {properties['RouteKey']} names a JWT authorizer local mode cannot find"
                )
            invoke = functions.integration(str(integration["IntegrationUri"]))
            routes.append(Route(str(properties["RouteKey"]), invoke, authorizer))
        return ApiConfig(
            api_id=api_id,
            routes=routes,
            cors=self._cors(apis, console_origin),
            throttle=self._throttle(http_api),
            local=local,
        )

    def _verifier(self, properties: dict[str, Any]) -> JwtVerifier:
        configuration = properties["JwtConfiguration"]
        issuer = str(configuration["Issuer"])
        pool_id = issuer.rstrip("/").rsplit("/", 1)[-1]
        source = (properties.get("IdentitySource") or ["$request.header.Authorization"])[0]
        header = str(source).rsplit(".", 1)[-1].lower()
        return JwtVerifier(
            JwtAuthorizer(
                issuer=issuer,
                audiences=tuple(str(a) for a in configuration.get("Audience", [])),
                jwks_url=f"{self.endpoint}/{pool_id}/.well-known/jwks.json",
                identity_header=header,
            )
        )

    def _cors(self, apis: list[Resource], console_origin: str | None) -> Cors | None:
        if not apis or "CorsConfiguration" not in apis[0].properties:
            return None
        cors = self.resolver.resolve(apis[0].properties["CorsConfiguration"])
        # The template's origins are AWS's (the console's CloudFront origin, or `*`); locally the
        # console has its own origin, and the API allows that one only, as a deployed API should.
        origins = (console_origin,) if console_origin is not None else tuple(cors.get("AllowOrigins", []))
        return Cors(
            allow_origins=origins,
            allow_headers=tuple(cors.get("AllowHeaders", [])),
            allow_methods=tuple(cors.get("AllowMethods", [])),
            expose_headers=tuple(cors.get("ExposeHeaders", [])),
            max_age=cors.get("MaxAge"),
            allow_credentials=bool(cors.get("AllowCredentials", False)),
        )

    def _throttle(self, http_api: dict[str, str] | None) -> TokenBucket | None:
        for stage in self.template.resources("AWS::ApiGatewayV2::Stage"):
            if stage.properties.get("ApiId") != http_api:
                continue
            settings = self.resolver.resolve(stage.properties).get("DefaultRouteSettings", {})
            if "ThrottlingRateLimit" in settings:
                rate = float(settings["ThrottlingRateLimit"])
                return TokenBucket(rate=rate, burst=float(settings.get("ThrottlingBurstLimit", rate)))
        return None


def _logical_id_from_target(resolved: str, raw: Any) -> str:
    # Target is Fn::Join ["", ["integrations/", {"Ref": Integration}]]: read the Ref from the raw form.
    if isinstance(raw, dict) and "Fn::Join" in raw:
        for part in raw["Fn::Join"][1]:
            if isinstance(part, dict) and "Ref" in part:
                return str(part["Ref"])
    return resolved.removeprefix("integrations/")
