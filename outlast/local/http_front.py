"""An HTTP API (payload format 2.0) in front of the local functions, answering as API Gateway does.

Routes, the JWT authorizer, CORS and stage throttling come from the template. API Gateway's
own answers (401 from the authorizer, 404 for no route, 429 throttled, 500 when the function
fails) are its plain `{"message": ...}` bodies, not problem+json, as in AWS.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from typing import Any, Protocol

from outlast.local.http_handler import LocalRequestHandler
from outlast.local.jwt_auth import JwtVerifier, Unauthorized, as_api_gateway_claims

MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
Invoke = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class Route:
    """One route: `METHOD /path/{param}` to a function, maybe behind a JWT authorizer."""

    route_key: str
    invoke: Invoke
    authorizer: JwtVerifier | None

    @property
    def method(self) -> str:
        return self.route_key.split(" ", 1)[0]

    @property
    def pattern(self) -> re.Pattern[str]:
        path = self.route_key.split(" ", 1)[1]
        regex = re.sub(r"\\{(\w+)\\\+\\}", r"(?P<\1>.+)", re.escape(path))
        regex = re.sub(r"\\{(\w+)\\}", r"(?P<\1>[^/]+)", regex)
        return re.compile(f"^{regex}$")

    @property
    def specificity(self) -> tuple[int, int]:
        path = self.route_key.split(" ", 1)[1]
        segments = path.strip("/").split("/")
        return (sum(1 for s in segments if not s.startswith("{")), len(segments))


@dataclass(frozen=True)
class Cors:
    """AWS::ApiGatewayV2::Api CorsConfiguration."""

    allow_origins: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    allow_methods: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age: int | None = None
    allow_credentials: bool = False

    def origin_allowed(self, origin: str) -> str | None:
        if "*" in self.allow_origins:
            return "*"
        return origin if origin in self.allow_origins else None


@dataclass
class TokenBucket:
    """Stage throttling: a steady rate with a burst allowance."""

    rate: float
    burst: float
    tokens: float = field(init=False)
    updated: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.tokens = self.burst

    def take(self) -> bool:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class LocalEndpoints(Protocol):
    """Paths the local front serves beside the API's routes (local mode only: the console's sign-in)."""

    def answer(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes] | None:
        """The answer for one of its paths; None for any other."""


@dataclass
class ApiConfig:
    """Everything the front needs, resolved from the template."""

    api_id: str
    routes: list[Route]
    cors: Cors | None = None
    throttle: TokenBucket | None = None
    local: LocalEndpoints | None = None


@dataclass(frozen=True)
class _Incoming:
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    parameters: dict[str, str]


def _request_id() -> str:
    return base64.b64encode(secrets.token_bytes(10)).decode()


def _plain(
    status: int, message: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    return (
        status,
        {"Content-Type": "application/json", **(headers or {})},
        json.dumps({"message": message}).encode(),
    )


class _Front(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], config: ApiConfig) -> None:
        super().__init__(address, _Handler)
        self.config = config
        self.routes = sorted(config.routes, key=lambda r: r.specificity, reverse=True)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up is normal (a timeout, Ctrl-C); anything else is printed as usual."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(LocalRequestHandler):
    server: _Front

    def do_GET(self) -> None:
        self._handle()

    # Every method reaches the router: a method no route has is API Gateway's plain 404, not a 501.
    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_TRACE = do_CONNECT = do_GET

    def _handle(self) -> None:
        request_id = _request_id()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_PAYLOAD_BYTES:
            self._reply(request_id, *_plain(413, "Request Entity Too Large"), close=True)
            return
        body = self.rfile.read(length) if length else b""
        local = self._local(body)
        status, headers, payload = local if local is not None else self._answer(request_id, body)
        self._reply(request_id, status, headers, payload)

    def _local(self, body: bytes) -> tuple[int, dict[str, str], bytes] | None:
        """Local mode's own endpoints (the console's sign-in), before the API's routes."""
        local = self.server.config.local
        if local is None:
            return None
        path, _, query = self.path.partition("?")
        headers = {key.lower(): value for key, value in self.headers.items()}
        return local.answer(self.command, path, query, headers, body)

    def _answer(self, request_id: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        config = self.server.config
        headers = {key.lower(): value for key, value in self.headers.items()}
        origin = headers.get("origin")
        path, _, query = self.path.partition("?")
        if (
            self.command == "OPTIONS"
            and config.cors
            and origin
            and "access-control-request-method" in headers
        ):
            return self._preflight(config.cors, origin)
        if config.throttle is not None and not config.throttle.take():
            return self._with_cors(_plain(429, "Too Many Requests"), origin)
        match = self._route(path)
        if match is None:
            return self._with_cors(_plain(404, "Not Found"), origin)
        route, parameters = match
        claims: dict[str, Any] | None = None
        if route.authorizer is not None:
            try:
                claims = route.authorizer.claims(headers)
            except Unauthorized:
                challenge = {"www-authenticate": 'Bearer scope="" error="invalid_token"'}
                return self._with_cors(_plain(401, "Unauthorized", challenge), origin)
        incoming = _Incoming(path=path, query=query, headers=headers, body=body, parameters=parameters)
        event = self._event(request_id, route, incoming, claims)
        try:
            response = route.invoke(event)
        except Exception:  # noqa: BLE001 - any function failure is API Gateway's 500
            return self._with_cors(_plain(500, "Internal Server Error"), origin)
        return self._with_cors(_response(response), origin)

    def _route(self, path: str) -> tuple[Route, dict[str, str]] | None:
        for route in self.server.routes:
            if route.method not in {self.command, "ANY"}:
                continue
            found = route.pattern.match(urllib.parse.unquote(path))
            if found:
                return route, found.groupdict()
        return None

    def _event(
        self, request_id: str, route: Route, incoming: _Incoming, claims: dict[str, Any] | None
    ) -> dict[str, Any]:
        path, query, headers, body = incoming.path, incoming.query, incoming.headers, incoming.body
        parameters = incoming.parameters
        now = datetime.now(UTC)
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        query_parameters: dict[str, str] = {}
        for key, value in pairs:
            query_parameters[key] = f"{query_parameters[key]},{value}" if key in query_parameters else value
        try:
            text, is_base64 = body.decode("utf-8"), False
        except UnicodeDecodeError:
            text, is_base64 = base64.b64encode(body).decode(), True
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": route.route_key,
            "rawPath": path,
            "rawQueryString": query,
            "headers": {k: v for k, v in headers.items() if k != "cookie"},
            "requestContext": {
                "accountId": "123456789012",
                "apiId": self.server.config.api_id,
                "domainName": headers.get("host", "127.0.0.1"),
                "domainPrefix": self.server.config.api_id,
                "http": {
                    "method": self.command,
                    "path": path,
                    "protocol": self.request_version,
                    "sourceIp": self.client_address[0],
                    "userAgent": headers.get("user-agent", ""),
                },
                "requestId": request_id,
                "routeKey": route.route_key,
                "stage": "$default",
                "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
                "timeEpoch": int(now.timestamp() * 1000),
            },
            "isBase64Encoded": is_base64,
        }
        if "cookie" in headers:
            event["cookies"] = [c.strip() for c in headers["cookie"].split(";")]
        if query_parameters:
            event["queryStringParameters"] = query_parameters
        if parameters:
            event["pathParameters"] = parameters
        if body:
            event["body"] = text
        if claims is not None:
            event["requestContext"]["authorizer"] = {
                "jwt": {"claims": as_api_gateway_claims(claims), "scopes": None}
            }
        return event

    def _preflight(self, cors: Cors, origin: str) -> tuple[int, dict[str, str], bytes]:
        allowed = cors.origin_allowed(origin)
        if allowed is None:
            return 204, {}, b""
        headers = {
            "Access-Control-Allow-Origin": allowed,
            "Access-Control-Allow-Methods": ",".join(cors.allow_methods) or "*",
            "Access-Control-Allow-Headers": ",".join(cors.allow_headers),
        }
        if cors.max_age is not None:
            headers["Access-Control-Max-Age"] = str(cors.max_age)
        if cors.allow_credentials:
            headers["Access-Control-Allow-Credentials"] = "true"
        return 204, headers, b""

    def _with_cors(
        self, answer: tuple[int, dict[str, str], bytes], origin: str | None
    ) -> tuple[int, dict[str, str], bytes]:
        cors = self.server.config.cors
        if cors is None or origin is None or cors.origin_allowed(origin) is None:
            return answer
        status, headers, body = answer
        headers = {**headers, "Access-Control-Allow-Origin": str(cors.origin_allowed(origin))}
        if cors.expose_headers:
            headers["Access-Control-Expose-Headers"] = ",".join(cors.expose_headers)
        return status, headers, body

    def _reply(
        self, request_id: str, status: int, headers: dict[str, str], body: bytes, close: bool = False
    ) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("apigw-requestid", request_id)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def _response(response: Any) -> tuple[int, dict[str, str], bytes]:
    """A payload 2.0 function response as HTTP (with API Gateway's inference when it is not a dict)."""
    if not isinstance(response, dict) or "statusCode" not in response:
        return 200, {"Content-Type": "application/json"}, json.dumps(response).encode()
    headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
    body = response.get("body") or ""
    payload = base64.b64decode(body) if response.get("isBase64Encoded") else str(body).encode()
    return int(response["statusCode"]), headers, payload


class ApiFront:
    """The HTTP front on a port, in a background thread."""

    def __init__(self, config: ApiConfig, host: str = "127.0.0.1", port: int = 8000) -> None:
        self._server = _Front((host, port), config)
        self._thread = threading.Thread(target=self._server.serve_forever, name="api-front", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ApiFront:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
