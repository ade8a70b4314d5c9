"""An API Gateway WebSocket API in front of the local functions, and its `@connections` management API.

Routes, the `$connect` REQUEST authorizer, the route selection expression, route responses and
integrations come from the template (outlast.local.stack reads them). The WebSocket protocol is
the `websockets` library's (its threaded server); nothing here frames a message by hand.

As API Gateway does:
- `$connect`: no value for the authorizer's identity source (the `ticket` query parameter) is a
  401 without calling the authorizer; the authorizer's Deny is a 403, its failure (or an
  "Unauthorized" error) a 401/500; then the `$connect` integration runs, and only a 2xx answer
  completes the handshake. Its context reaches every later route as `requestContext.authorizer`.
- messages go to the route the selection expression names (`$request.body.action`), else
  `$default`; a route with a route response sends the integration's body back to the client.
- `$disconnect` runs once the connection is gone, however it ended.
- the management API: `POST /<stage>/@connections/{id}` sends, `GET` describes, `DELETE` closes;
  an id that is not an open connection answers 410 with `x-amzn-ErrorType: GoneException`.
- connections end after 10 idle minutes or 2 hours; frames are limited to 128 KB.
Log lines never hold a ticket: query strings are redacted (`redact`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

from outlast.local.http_handler import LocalRequestHandler

Invoke = Callable[[dict[str, Any]], Any]
Log = Callable[[str], None]

ACCOUNT_ID = "123456789012"
REGION = "us-east-1"
LOCAL_PATH = "/ws"  # where local mode mounts the stage: ws://127.0.0.1:PORT/ws
IDLE_TIMEOUT_SECONDS = 600.0
MAX_CONNECTION_SECONDS = 7200.0
MAX_FRAME_BYTES = 128 * 1024
_SECRET_QUERY = re.compile(r"(?i)(ticket=)[^&\s\"']*")


def redact(text: str) -> str:
    """A log line with every `ticket=` value replaced: tickets are credentials."""
    return _SECRET_QUERY.sub(r"\1<redacted>", text)


def _connection_id() -> str:
    # API Gateway's ids are 16 base64 characters ending in '='; URL-safe here so paths stay simple.
    return base64.urlsafe_b64encode(secrets.token_bytes(10)).decode()


def _request_id() -> str:
    return base64.b64encode(secrets.token_bytes(10)).decode()


def _request_time(now: datetime) -> str:
    return now.strftime("%d/%b/%Y:%H:%M:%S +0000")


@dataclass(frozen=True)
class RequestAuthorizer:
    """An AWS::ApiGatewayV2::Authorizer of type REQUEST, resolved: its function and identity sources."""

    invoke: Invoke
    identity_sources: tuple[str, ...]

    def identity_present(self, query: Mapping[str, str], headers: Mapping[str, str]) -> bool:
        """False when any identity source has no value: API Gateway then answers 401 on its own."""
        for source in self.identity_sources:
            name = source.rsplit(".", 1)[-1]
            if source.startswith("route.request.querystring.") and not query.get(name):
                return False
            if source.startswith("route.request.header.") and not headers.get(name.lower()):
                return False
        return True


@dataclass(frozen=True)
class WebSocketRoute:
    """One route: its key, its integration, whether a route response sends the answer back."""

    route_key: str
    invoke: Invoke
    returns_response: bool = False


@dataclass
class WebSocketConfig:
    """Everything the front needs, resolved from the template."""

    api_id: str
    stage: str
    routes: dict[str, WebSocketRoute]
    authorizer: RequestAuthorizer | None = None
    selection_key: str | None = "action"  # from `$request.body.action`


@dataclass
class _Live:
    connection: ServerConnection
    connection_id: str
    connected_at: datetime
    source_ip: str
    user_agent: str
    authorizer: dict[str, Any] | None
    last_active: datetime = field(default_factory=lambda: datetime.now(UTC))


class ConnectionRegistry:
    """The open connections by id (what the management API reaches), thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, _Live] = {}

    def add(self, live: _Live) -> None:
        with self._lock:
            self._open[live.connection_id] = live

    def remove(self, connection_id: str) -> None:
        with self._lock:
            self._open.pop(connection_id, None)

    def get(self, connection_id: str) -> _Live | None:
        with self._lock:
            return self._open.get(connection_id)

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._open)


class WebSocketFront:
    """The WebSocket API on a loopback port; bound at once, configured and started later."""

    def __init__(
        self, registry: ConnectionRegistry, log: Log, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._registry = registry
        self._log = log
        self._socket = socket.create_server((host, port))
        self._config: WebSocketConfig | None = None
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._pending: dict[ServerConnection, _Live] = {}
        self._pending_lock = threading.Lock()

    @property
    def url(self) -> str:
        """The stage's local URL (ws://127.0.0.1:PORT/ws), which tickets are appended to."""
        host, port = self._socket.getsockname()[:2]
        return f"ws://{host}:{port}{LOCAL_PATH}"

    def start(self, config: WebSocketConfig) -> WebSocketFront:
        """Serve the configured API on a background thread."""
        self._config = config
        self._server = serve(
            self._handle,
            sock=self._socket,
            process_request=self._process_request,
            compression=None,  # API Gateway negotiates no permessage-deflate
            ping_interval=None,  # nor does it ping clients
            max_size=MAX_FRAME_BYTES,
            server_header=None,
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="websocket-front", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close every connection (each gets its $disconnect) and stop serving."""
        if self._server is not None:
            self._server.shutdown()
            if self._thread is not None:
                self._thread.join(timeout=10)
        else:
            self._socket.close()

    # --- the handshake: authorizer, then $connect -----------------------------------------------

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        config = self._require_config()
        path, _, raw_query = request.path.partition("?")
        if path.rstrip("/") != LOCAL_PATH:
            self._log(f"[websocket] {redact(request.path)} 403 (no such stage)")
            return connection.respond(403, "Forbidden\n")
        query = dict(urllib.parse.parse_qsl(raw_query, keep_blank_values=True))
        headers = {key.lower(): value for key, value in request.headers.raw_items()}
        now = datetime.now(UTC)
        live = _Live(
            connection=connection,
            connection_id=_connection_id(),
            connected_at=now,
            source_ip=str(connection.remote_address[0]),
            user_agent=headers.get("user-agent", ""),
            authorizer=None,
        )
        refused = self._authorize(config, live, request, query, headers)
        if refused is not None:
            return refused
        event = self._connect_event(config, live, request, query)
        try:
            answer = (
                config.routes["$connect"].invoke(event)
                if "$connect" in config.routes
                else {"statusCode": 200}
            )
        except Exception:  # noqa: BLE001 - any integration failure refuses the handshake, as in AWS
            self._log(f"[websocket] {redact(request.path)} 500 ($connect failed)")
            return connection.respond(500, "Internal Server Error\n")
        status = int((answer or {}).get("statusCode", 200)) if isinstance(answer, dict) else 200
        if not 200 <= status < 300:
            self._log(f"[websocket] {redact(request.path)} {status} ($connect refused)")
            return connection.respond(status, "Forbidden\n" if status == 403 else "Refused\n")
        with self._pending_lock:
            self._pending[connection] = live
        self._log(f"[websocket] {redact(request.path)} 101 connection {live.connection_id}")
        return None

    def _authorize(
        self,
        config: WebSocketConfig,
        live: _Live,
        request: Request,
        query: dict[str, str],
        headers: dict[str, str],
    ) -> Response | None:
        authorizer = config.authorizer
        if authorizer is None:
            return None
        connection = live.connection
        if not authorizer.identity_present(query, headers):
            self._log(f"[websocket] {redact(request.path)} 401 (no identity)")
            return connection.respond(401, "Unauthorized\n")
        method_arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT_ID}:{config.api_id}/{config.stage}/$connect"
        event = {
            "type": "REQUEST",
            "methodArn": method_arn,
            **self._request_parts(request, query),
            "stageVariables": {},
            "requestContext": self._context(config, live, "$connect", "CONNECT"),
        }
        started = time.monotonic()
        try:
            answer = authorizer.invoke(event)
        except Exception as error:  # noqa: BLE001 - an authorizer failure is API Gateway's 401 or 500
            unauthorized = "Unauthorized" in str(error)
            self._log(
                f"[websocket] {redact(request.path)} {401 if unauthorized else 500} (authorizer failed)"
            )
            return (
                connection.respond(401, "Unauthorized\n")
                if unauthorized
                else connection.respond(500, "Error\n")
            )
        if not _allows(answer, method_arn):
            self._log(f"[websocket] {redact(request.path)} 403 (authorizer denied)")
            return connection.respond(403, "Forbidden\n")
        context = {
            k: v for k, v in (answer.get("context") or {}).items() if isinstance(v, str | int | float | bool)
        }
        live.authorizer = {
            **context,
            "principalId": str(answer.get("principalId", "")),
            "integrationLatency": int((time.monotonic() - started) * 1000),
        }
        return None

    # --- an open connection ----------------------------------------------------------------------

    def _handle(self, connection: ServerConnection) -> None:
        config = self._require_config()
        with self._pending_lock:
            live = self._pending.pop(connection, None)
        if live is None:  # pragma: no cover - process_request always registers an accepted connection
            return
        self._registry.add(live)
        ended = time.monotonic() + MAX_CONNECTION_SECONDS
        close_code = 1005
        try:
            while True:
                try:
                    message = connection.recv(
                        timeout=min(IDLE_TIMEOUT_SECONDS, max(0.0, ended - time.monotonic()))
                    )
                except TimeoutError:
                    connection.close(1001, "Going away")
                    break
                live.last_active = datetime.now(UTC)
                self._message(config, live, message)
        except ConnectionClosed as closed:
            close_code = closed.rcvd.code if closed.rcvd is not None else 1006
        finally:
            self._registry.remove(live.connection_id)
            self._disconnect(config, live, close_code)

    def _message(self, config: WebSocketConfig, live: _Live, message: str | bytes) -> None:
        text = message if isinstance(message, str) else None
        body = (
            text
            if text is not None
            else base64.b64encode(message if isinstance(message, bytes) else b"").decode()
        )
        route = config.routes.get(self._selected(config, text) or "") or config.routes.get("$default")
        if route is None:
            live.connection.send(json.dumps({"message": "Forbidden", "connectionId": live.connection_id}))
            return
        request_id = _request_id()
        event = {
            "requestContext": {
                **self._context(config, live, route.route_key, "MESSAGE", request_id),
                "messageId": _request_id(),
            },
            "body": body,
            "isBase64Encoded": text is None,
        }
        try:
            answer = route.invoke(event)
        except Exception:  # noqa: BLE001 - the client gets API Gateway's message, never the error
            live.connection.send(
                json.dumps(
                    {
                        "message": "Internal server error",
                        "connectionId": live.connection_id,
                        "requestId": request_id,
                    }
                )
            )
            return
        if route.returns_response and isinstance(answer, dict) and answer.get("body") is not None:
            live.connection.send(str(answer["body"]))

    def _selected(self, config: WebSocketConfig, text: str | None) -> str | None:
        if config.selection_key is None or text is None:
            return None
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):
            return None
        value = body.get(config.selection_key) if isinstance(body, dict) else None
        return value if isinstance(value, str) else None

    def _disconnect(self, config: WebSocketConfig, live: _Live, code: int) -> None:
        route = config.routes.get("$disconnect")
        if route is None:
            return
        event = {
            "headers": {"Host": "127.0.0.1"},
            "multiValueHeaders": {"Host": ["127.0.0.1"]},
            "requestContext": {
                **self._context(config, live, "$disconnect", "DISCONNECT"),
                "disconnectStatusCode": code,
                "disconnectReason": "",
            },
            "isBase64Encoded": False,
        }
        with contextlib.suppress(Exception):  # best effort, as API Gateway says of $disconnect
            route.invoke(event)

    # --- events --------------------------------------------------------------------------------

    def _request_parts(self, request: Request, query: dict[str, str]) -> dict[str, Any]:
        headers: dict[str, str] = {}
        multi: dict[str, list[str]] = {}
        for key, value in request.headers.raw_items():
            headers[key] = value
            multi.setdefault(key, []).append(value)
        parts: dict[str, Any] = {"headers": headers, "multiValueHeaders": multi}
        if query:
            parts["queryStringParameters"] = dict(query)
            parts["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()}
        return parts

    def _connect_event(
        self, config: WebSocketConfig, live: _Live, request: Request, query: dict[str, str]
    ) -> dict[str, Any]:
        return {
            **self._request_parts(request, query),
            "requestContext": self._context(config, live, "$connect", "CONNECT"),
            "isBase64Encoded": False,
        }

    def _context(
        self,
        config: WebSocketConfig,
        live: _Live,
        route_key: str,
        event_type: str,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        now = datetime.now(UTC)
        request = request_id or _request_id()
        context: dict[str, Any] = {
            "routeKey": route_key,
            "eventType": event_type,
            "extendedRequestId": request,
            "requestTime": _request_time(now),
            "messageDirection": "IN",
            "stage": config.stage,
            "connectedAt": int(live.connected_at.timestamp() * 1000),
            "requestTimeEpoch": int(now.timestamp() * 1000),
            "identity": {"sourceIp": live.source_ip, "userAgent": live.user_agent},
            "requestId": request,
            "domainName": "127.0.0.1",
            "connectionId": live.connection_id,
            "apiId": config.api_id,
        }
        if live.authorizer is not None:
            context["authorizer"] = dict(live.authorizer)
        return context

    def _require_config(self) -> WebSocketConfig:
        if self._config is None:
            raise RuntimeError("the WebSocket front is not configured")
        return self._config


def _allows(answer: Any, method_arn: str) -> bool:
    """True when the authorizer's policy allows execute-api:Invoke on the route and denies nothing."""
    if not isinstance(answer, dict):
        return False
    statements = (answer.get("policyDocument") or {}).get("Statement") or []
    allowed = False
    for statement in statements if isinstance(statements, list) else [statements]:
        if not isinstance(statement, dict) or not _covers(statement, method_arn):
            continue
        if statement.get("Effect") == "Deny":
            return False
        allowed = allowed or statement.get("Effect") == "Allow"
    return allowed


def _covers(statement: dict[str, Any], method_arn: str) -> bool:
    actions = statement.get("Action", [])
    resources = statement.get("Resource", [])
    actions = actions if isinstance(actions, list) else [actions]
    resources = resources if isinstance(resources, list) else [resources]
    if not any(a in {"execute-api:Invoke", "execute-api:*", "*"} for a in actions):
        return False
    return any(re.fullmatch(re.escape(str(r)).replace(r"\*", ".*"), method_arn) for r in resources)


# --- the management API ---------------------------------------------------------------------------


class ManagementApi:
    """`@connections` on a loopback port: the endpoint the stage's callback URL resolves to locally."""

    def __init__(
        self, registry: ConnectionRegistry, log: Log, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._server = _ManagementServer((host, port), registry, log)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="connections-api", daemon=True
        )

    @property
    def url(self) -> str:
        """The callback URL of the stage (http://127.0.0.1:PORT/ws)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{LOCAL_PATH}"

    def start(self) -> ManagementApi:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() would wait forever for a loop that never ran
            self._server.shutdown()
        self._server.server_close()


class _ManagementServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], registry: ConnectionRegistry, log: Log) -> None:
        super().__init__(address, _ManagementHandler)
        self.registry = registry
        self.log = log


class _ManagementHandler(LocalRequestHandler):
    server: _ManagementServer

    def do_POST(self) -> None:
        live, body = self._target()
        if live is None:
            return
        try:
            live.connection.send(body.decode("utf-8"))
        except (ConnectionClosed, UnicodeDecodeError):
            self._gone()
            return
        except Exception:  # noqa: BLE001 - any other failure is API Gateway's 500, not a dropped socket
            self._reply(
                500,
                json.dumps({"message": "Internal server error"}).encode(),
                "application/json",
                {"x-amzn-ErrorType": "InternalServerErrorException"},
            )
            return
        self._reply(200, b"")

    def do_GET(self) -> None:
        live, _ = self._target()
        if live is None:
            return
        info = {
            "ConnectedAt": live.connected_at.isoformat().replace("+00:00", "Z"),
            "Identity": {"SourceIp": live.source_ip, "UserAgent": live.user_agent},
            "LastActiveAt": live.last_active.isoformat().replace("+00:00", "Z"),
        }
        self._reply(200, json.dumps(info).encode(), "application/json")

    def do_DELETE(self) -> None:
        live, _ = self._target()
        if live is None:
            return
        self.server.registry.remove(live.connection_id)
        # Closing waits for the client's close frame; the answer does not.
        threading.Thread(target=live.connection.close, daemon=True).start()
        self._reply(204, b"")

    def _target(self) -> tuple[_Live | None, bytes]:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = urllib.parse.urlsplit(self.path).path
        found = re.fullmatch(r"(?:/[^/@]+)?/@connections/([^/]+)", path)
        if not found:
            self._reply(404, json.dumps({"message": "Not Found"}).encode(), "application/json")
            return None, body
        connection_id = urllib.parse.unquote(found.group(1))
        live = self.server.registry.get(connection_id)
        if live is None:
            self._gone()
        return live, body

    def _gone(self) -> None:
        self._reply(
            410,
            json.dumps({"message": None}).encode(),
            "application/json",
            {"x-amzn-ErrorType": "GoneException"},
        )

    def _reply(
        self,
        status: int,
        body: bytes,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("x-amzn-RequestId", _request_id())
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


__all__ = [
    "LOCAL_PATH",
    "ConnectionRegistry",
    "ManagementApi",
    "RequestAuthorizer",
    "WebSocketConfig",
    "WebSocketFront",
    "WebSocketRoute",
    "redact",
]
