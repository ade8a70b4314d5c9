"""Live updates, emulated: the WebSocket API's front and its management (`@connections`) API.

Emulates infra/constructs/realtime.py's WebSocket API and stage (its connections table is
storage's, its functions are functions'). Both servers are bound before the functions start:
the notifier's environment names the stage's URLs, which local mode points at them
(outlast.local.websocket_template.local_urls), and the IAM evaluator must know which local
endpoint is which stage. The routes, the REQUEST authorizer and the route responses come from
the template; outlast.local.websocket_front serves them.
"""

from __future__ import annotations

from pathlib import Path

from outlast.local.capabilities.base import Log, Starter, file_log
from outlast.local.capabilities.functions import Functions
from outlast.local.template import Resolver, Template
from outlast.local.websocket_front import ConnectionRegistry, ManagementApi, WebSocketFront
from outlast.local.websocket_template import local_urls, stage_name, websocket_api, websocket_config


class Realtime(Starter):
    """The WebSocket front and the management API, when the template has a WebSocket API."""

    def __init__(self, *, port: int, logs: Path, verbose: bool, log: Log) -> None:
        self._port = port
        self._logs = logs
        self._verbose = verbose
        self._log = log
        self.connections = ConnectionRegistry()
        self._websocket: WebSocketFront | None = None
        self._management: ManagementApi | None = None
        # What the functions' environment and roles need: the AWS URLs of the stage, pointed here,
        self.local_urls: dict[str, str] = {}
        # and the management endpoint -> (API id, stage).
        self.stages: dict[str, tuple[str, str]] = {}

    @property
    def url(self) -> str | None:
        """The local WebSocket stage's URL (after bind), or None when the template has no WebSocket API."""
        return self._websocket.url if self._websocket is not None else None

    def bind(self, template: Template, resolver: Resolver) -> Realtime:
        """Bind both servers' ports (before the functions start: their environment names them)."""
        api = websocket_api(template)
        if api is None:
            return self
        # Every line passes outlast.local.websocket_front.redact first: no ticket is ever written.
        log = file_log(self._logs / "websocket.log", self._log if self._verbose else None)
        self._websocket = WebSocketFront(self.connections, log, port=self._port)
        self._management = ManagementApi(self.connections, log)
        stage = stage_name(template, api)
        self.local_urls = local_urls(resolver, api, stage, self._websocket.url, self._management.url)
        self.stages = {self._management.url.rstrip("/"): (str(resolver.ref(api.logical_id)), stage)}
        return self

    def start(self, template: Template, resolver: Resolver, functions: Functions) -> Realtime:
        """Serve the routes, each integration invoking its function."""
        api = websocket_api(template)
        if api is None or self._websocket is None or self._management is None:
            return self
        api_id = str(resolver.ref(api.logical_id))
        config = websocket_config(template, resolver, api, functions.integration, api_id)
        self._management.start()
        self._websocket.start(config)
        return self

    def stop(self) -> None:
        # After the pools are told to stop: each open connection's $disconnect then fails at once.
        if self._websocket is not None:
            self._websocket.stop()
        if self._management is not None:
            self._management.stop()
