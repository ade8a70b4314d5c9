"""`outlast local up`: the whole system on one machine, built from the synthesized template.

moto (server mode, its own process) holds the tables, queues, buckets, secrets and user pool,
created from the template's properties. Each function runs its template handler string from
its cdk.out asset in awslambdaric processes, with its template environment resolved to the
local resources. The HTTP front, the event source pollers, the schedule and a TTL reaper
(moto never expires items) run as threads of this process, with the local model server.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

from infra.console_build import ConsoleBuildError, build_console
from infra.console_policy import CONSOLE_SCOPES
from infra.names import CLI_CLIENT, CONSOLE_CLIENT
from outlast.auth.callbacks import CALLBACK_URLS
from outlast.chaos.spec import ENV_HANDLER, ENV_SPEC, SHIM_HANDLER, ChaosSpec
from outlast.local import event_sources
from outlast.local.console_front import ConsoleFront
from outlast.local.event_sources import SqsSource, StreamSource, scheduled_event
from outlast.local.http_front import ApiConfig, ApiFront, Cors, Route, TokenBucket
from outlast.local.iam.enforcement import Enforcement
from outlast.local.iam.roles import local_where
from outlast.local.jwt_auth import JwtAuthorizer, JwtVerifier
from outlast.local.lambda_runtime import (
    FunctionError,
    FunctionPool,
    FunctionSpec,
    guarded,
    host_environment,
    spawn,
)
from outlast.local.model_server import ModelServer
from outlast.local.oauth import LocalAuthorizationServer, PublicClient
from outlast.local.process import free_port
from outlast.local.provision import LocalResources, Provisioner
from outlast.local.synth import PROJECT_ROOT, synthesize
from outlast.local.template import REGION, Resolver, Resource, Template, TemplateError
from outlast.local.users import refresh, sign_in
from outlast.local.websocket_front import ConnectionRegistry, ManagementApi, WebSocketFront
from outlast.local.websocket_template import (
    local_urls,
    localize,
    stage_name,
    websocket_api,
    websocket_config,
)
from shared import resources as r

# Local policy on top of the template (DESIGN.md, "Local mode"): backoff from 1 s doubling to
# 20 s, a 5 s provider timeout, and no X-Ray daemon to send traces to.
LOCAL_FUNCTION_ENVIRONMENT = {
    "BACKOFF_BASE_SECONDS": "1",
    "BACKOFF_CAP_SECONDS": "20",
    "PROVIDER_TIMEOUT_SECONDS": "5",
    "POWERTOOLS_TRACE_DISABLED": "true",
}
# Local mode alone turns these on, and only for the functions whose template sets them (to
# "false", always, in the template): the webhook sender may call plain http receivers on
# loopback, such as a receiver a developer runs next to `outlast local up`.
LOCAL_ONLY_OVERRIDES = {r.ENV_WEBHOOK_LOCAL_EGRESS: "true"}
# An HTTP API gives up on an integration after 30 s; a request that finds every environment busy
# that long gets API Gateway's 500 instead of waiting forever.
INTEGRATION_TIMEOUT_SECONDS = 30.0
LOCAL_CONCURRENCY = 4  # per function: two cores do not gain from more processes
STATE_DIR = PROJECT_ROOT / ".local"


@dataclass
class LocalOptions:
    """How to run the local stack."""

    port: int = 8000
    ws_port: int = 0  # the WebSocket front's port; 0: a free one (printed as `websocket: ws://...`)
    # The web console's port (its own origin); None: the API's port + 1 when free, else any free one.
    console_port: int | None = None
    cdk_out: Path = PROJECT_ROOT / "cdk.out.local"
    context: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    schedule_seconds: float | None = None  # run scheduled functions this often instead of their rate
    # moto never expires items; the reaper scans under moto's one lock, so not too often.
    reap_seconds: float = 30.0
    verbose: bool = False
    chaos: ChaosSpec | None = None  # run every function under the fault-injection shim (chaos_shim)
    log: Callable[[str], None] = print


def log_dir(port: int) -> Path:
    """Where the stack on `port` writes moto's and each function's log."""
    return STATE_DIR / f"logs-{port}"


def iam_dir(port: int) -> Path:
    """Where the stack on `port` keeps its functions' role files and the record of denied calls."""
    return STATE_DIR / f"iam-{port}"


def state_path(port: int) -> Path:
    """Where a running stack on `port` describes itself (for `outlast local token` and tests)."""
    return STATE_DIR / f"stack-{port}.json"


def read_state(port: int) -> dict[str, Any]:
    """The state file of the stack on `port`."""
    path = state_path(port)
    if not path.exists():
        raise FileNotFoundError(f"no local stack on port {port}: start one with `outlast local up`")
    state: dict[str, Any] = json.loads(path.read_text())
    return state


def _rate_seconds(expression: str) -> float:
    found = re.fullmatch(r"rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)", expression.strip())
    if not found:
        return 60.0  # a cron expression: locally, once a minute
    unit = {"minute": 60, "hour": 3600, "day": 86400}[found.group(2).rstrip("s")]
    return int(found.group(1)) * unit


class _Loop:
    """A daemon thread running `step` until stopped; exceptions are logged, not fatal."""

    def __init__(
        self, name: str, step: Callable[[], object], pause: float, log: Callable[[str], None]
    ) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(step, pause, log), name=name, daemon=True)

    def _run(self, step: Callable[[], object], pause: float, log: Callable[[str], None]) -> None:
        while not self._stop.is_set():
            try:
                step()
            except Exception as error:  # noqa: BLE001 - a poller must outlive one bad round
                if not self._stop.is_set():
                    log(f"[{self._thread.name}] {type(error).__name__}: {error}")
            self._stop.wait(pause)

    def start(self) -> _Loop:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout=timeout)


class LocalStack:
    """Starts and stops every local piece; `start()` returns once the API answers."""

    def __init__(self, options: LocalOptions) -> None:
        self.options = options
        self._template: Template | None = None
        self._resolver: Resolver | None = None
        self.resources = LocalResources()
        self.moto: subprocess.Popen[bytes] | None = None
        self.endpoint = ""
        self._model: ModelServer | None = None
        self.pools: dict[str, FunctionPool] = {}
        self._front: ApiFront | None = None
        self.loops: list[_Loop] = []
        self.scheduled: list[str] = []
        self.connections = ConnectionRegistry()
        self._websocket: WebSocketFront | None = None
        self._management: ManagementApi | None = None
        self._local_urls: dict[str, str] = {}
        self._stages: dict[str, tuple[str, str]] = {}  # management endpoint -> (API id, stage)
        self._console: ConsoleFront | None = None
        self._iam: Enforcement | None = None

    @property
    def template(self) -> Template:
        """The synthesized template (after start)."""
        if self._template is None:
            raise RuntimeError("the local stack is not started")
        return self._template

    @property
    def resolver(self) -> Resolver:
        """Intrinsic functions resolved to local resources (after start)."""
        if self._resolver is None:
            raise RuntimeError("the local stack is not started")
        return self._resolver

    @property
    def model(self) -> ModelServer:
        """The local model server (after start)."""
        if self._model is None:
            raise RuntimeError("the local stack is not started")
        return self._model

    @property
    def iam(self) -> Enforcement:
        """Every function's role, enforced (after start)."""
        if self._iam is None:
            raise RuntimeError("the local stack is not started")
        return self._iam

    @property
    def front(self) -> ApiFront:
        """The HTTP front (after start)."""
        if self._front is None:
            raise RuntimeError("the local stack is not started")
        return self._front

    # --- start -----------------------------------------------------------------------------

    def start(self) -> LocalStack:
        """Synthesize (or reuse cdk.out), start moto, create resources, start functions and fronts."""
        log = self.options.log
        log("synthesizing the CDK app (reused when fresh)...")
        self._template = synthesize(self.options.cdk_out, self.options.context)
        self._start_moto()
        self._resolver = Resolver(self._template)
        self.resources = Provisioner(self._template, self._resolver, self.endpoint).provision()
        self._model = ModelServer().start()
        self._bind_websocket()
        self._bind_console()
        self._start_iam()
        self._start_functions()
        self._front = ApiFront(self._api_config(), port=self.options.port).start()
        self._start_console()
        self._start_websocket()
        self._start_mappings()
        self._start_schedules()
        self._start_reaper()
        self._write_state()
        return self

    def _start_moto(self) -> None:
        logs = log_dir(self.options.port)
        logs.mkdir(parents=True, exist_ok=True)
        port = free_port()
        # Its output goes to a file: a pipe nobody reads would fill up and stall every AWS call.
        with (logs / "moto.log").open("w") as log:
            self.moto = spawn(
                lambda: subprocess.Popen(  # noqa: S603 - our own interpreter and module
                    guarded([sys.executable, "-m", "outlast.local.moto_server", "--port", str(port)]),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
            )
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while not _accepts(port):
            if self.moto.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto did not start; see {logs / 'moto.log'}")
            time.sleep(0.05)
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")

    def _start_iam(self) -> None:
        """Each function's role from the template, enforced on every call it makes (DESIGN.md,
        "Deploy fidelity"); always on: no function runs with broader credentials."""
        where = local_where(self._stages, self.resources.secrets)
        self._iam = Enforcement(
            self.template, self.resolver, iam_dir(self.options.port), where, self.options.log
        )
        self.loops.append(_Loop("iam", self._iam.poll, 0.5, self.options.log).start())

    def _base_environment(self) -> dict[str, str]:
        return {
            **host_environment(),
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,  # boto3 reads this one; Lambda sets both
            "AWS_ENDPOINT_URL": self.endpoint,
            "OPENAI_BASE_URL": self.model.url,
        }

    def _function_spec(self, resource: Resource) -> FunctionSpec:
        properties = self.resolver.resolve(resource.properties)
        variables = {
            k: localize(str(v), self._local_urls)
            for k, v in properties.get("Environment", {}).get("Variables", {}).items()
        }
        local_only = {k: v for k, v in LOCAL_ONLY_OVERRIDES.items() if k in variables}
        environment = {
            **variables,
            **LOCAL_FUNCTION_ENVIRONMENT,
            **local_only,
            **self.options.environment,
            **self.iam.environment(resource.logical_id),
        }
        handler = str(properties["Handler"])
        if self.options.chaos is not None:
            # Local mode only: the shim imports the real handler and injects faults around it.
            environment |= {ENV_HANDLER: handler, ENV_SPEC: self.options.chaos.to_json()}
            handler = SHIM_HANDLER
        return FunctionSpec(
            logical_id=resource.logical_id,
            name=str(self.resolver.ref(resource.logical_id)),
            handler=handler,
            code_dir=self.template.asset_path(resource),
            environment=environment,
            timeout_seconds=float(properties.get("Timeout", 3)),
            memory_mb=int(properties.get("MemorySize", 128)),
            concurrency=LOCAL_CONCURRENCY,
            entry="outlast.local.iam.bootstrap",
        )

    def _start_functions(self) -> None:
        base = self._base_environment()
        for resource in self.template.resources("AWS::Lambda::Function"):
            if not str(resource.properties.get("Handler", "")).startswith("functions."):
                continue  # CDK's own helper functions (custom resources, the console's deployment)
            spec = self._function_spec(resource)
            self.pools[spec.arn] = FunctionPool(spec, base, self._function_log(spec))

    def _function_log(self, spec: FunctionSpec) -> Callable[[str], None]:
        path = log_dir(self.options.port) / f"{spec.logical_id}.log"
        lock = threading.Lock()
        handle = path.open("a", encoding="utf-8")

        def log(line: str) -> None:
            with lock:
                handle.write(line + "\n")
                handle.flush()
            if self.options.verbose:
                self.options.log(f"[{spec.name}] {line}")

        return log

    def invoker(self, function_arn: str, max_wait: float | None = None) -> Callable[[dict[str, Any]], Any]:
        """Invoke a function by ARN; a function failure becomes the pollers' FunctionError."""
        pool = self.pools[function_arn]

        def invoke(event: dict[str, Any]) -> Any:
            try:
                return pool.invoke(event, max_wait)
            except FunctionError as error:
                self.options.log(f"[{pool.spec.name}] invocation failed: {error.error_type}")
                raise event_sources.FunctionError(error.error_type) from error

        return invoke

    def function_arn(self, name_or_logical_id: str) -> str:
        """A local function's ARN from its logical id, physical name or a prefix of either."""
        for arn, pool in self.pools.items():
            spec = pool.spec
            if name_or_logical_id in {spec.logical_id, spec.name} or spec.logical_id.startswith(
                name_or_logical_id
            ):
                return arn
        raise KeyError(name_or_logical_id)

    # --- the HTTP API ------------------------------------------------------------------------

    @property
    def websocket_url(self) -> str | None:
        """The local WebSocket stage's URL (after start), or None when the template has no WebSocket API."""
        return self._websocket.url if self._websocket is not None else None

    def _bind_websocket(self) -> None:
        """Bind the WebSocket front and the management API first: the functions' environment names them."""
        api = websocket_api(self.template)
        if api is None:
            return
        log = self._websocket_log()
        self._websocket = WebSocketFront(self.connections, log, port=self.options.ws_port)
        self._management = ManagementApi(self.connections, log)
        stage = stage_name(self.template, api)
        self._local_urls = local_urls(self.resolver, api, stage, self._websocket.url, self._management.url)
        self._stages = {self._management.url.rstrip("/"): (str(self.resolver.ref(api.logical_id)), stage)}

    def _websocket_log(self) -> Callable[[str], None]:
        path = log_dir(self.options.port) / "websocket.log"
        lock = threading.Lock()
        handle = path.open("a", encoding="utf-8")

        def log(line: str) -> None:
            # Every line passes outlast.local.websocket_front.redact first: no ticket is ever written.
            with lock:
                handle.write(line + "\n")
                handle.flush()
            if self.options.verbose:
                self.options.log(line)

        return log

    def _start_websocket(self) -> None:
        api = websocket_api(self.template)
        if api is None or self._websocket is None or self._management is None:
            return
        api_id = str(self.resolver.ref(api.logical_id))
        config = websocket_config(
            self.template,
            self.resolver,
            api,
            lambda arn: self.invoker(self._arn_of(arn), max_wait=INTEGRATION_TIMEOUT_SECONDS),
            api_id,
        )
        self._management.start()
        self._websocket.start(config)

    def _api_config(self) -> ApiConfig:
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
                continue  # the WebSocket API's routes: outlast.local.websocket_front serves them
            target = str(resolve(properties.get("Target", "")))
            integration = integrations[_logical_id_from_target(target, properties.get("Target"))]
            function_arn = str(integration["IntegrationUri"])
            authorizer_ref = properties.get("AuthorizerId", {})
            authorizer = (
                authorizers.get(authorizer_ref.get("Ref", "")) if isinstance(authorizer_ref, dict) else None
            )
            if properties.get("AuthorizationType") == "JWT" and authorizer is None:
                raise RuntimeError(
                    f"route {properties['RouteKey']} names a JWT authorizer local mode cannot find"
                )
            invoke = self.invoker(self._arn_of(function_arn), max_wait=INTEGRATION_TIMEOUT_SECONDS)
            routes.append(Route(str(properties["RouteKey"]), invoke, authorizer))
        return ApiConfig(
            api_id=api_id,
            routes=routes,
            cors=self._cors(apis),
            throttle=self._throttle(http_api),
            local=self._authorization_server(),
        )

    def _arn_of(self, uri: str) -> str:
        # An integration URI may be the function ARN or the apigateway invoke path around it.
        found = re.search(r"arn:aws:lambda:[^/]+:function:[^/]+?(?=/invocations|$)", uri)
        return found.group(0) if found else uri

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

    def _cors(self, apis: list[Resource]) -> Cors | None:
        if not apis or "CorsConfiguration" not in apis[0].properties:
            return None
        cors = self.resolver.resolve(apis[0].properties["CorsConfiguration"])
        # The template's origins are AWS's (the console's CloudFront origin, or `*`); locally the
        # console has its own origin, and the API allows that one only, as a deployed API should.
        origins = (
            (self._console.origin,) if self._console is not None else tuple(cors.get("AllowOrigins", []))
        )
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

    # --- the web console ---------------------------------------------------------------------

    @property
    def console_url(self) -> str | None:
        """The console's URL (after start), or None when it is not served (not built, no client)."""
        return self._console.url if self._console is not None else None

    def _client_ids(self) -> tuple[str | None, str | None]:
        """(the API's app client, the console's app client), by the console client's construct id."""
        api = console = None
        for logical_id, client_id in self.resources.user_pool_clients.items():
            if CONSOLE_CLIENT in logical_id:
                console = client_id
            elif api is None and CLI_CLIENT not in logical_id:
                api = client_id
        return api, console

    def _cli_client_id(self) -> str | None:
        """The command line's app client (`outlast login`), by its construct id."""
        found = (cid for lid, cid in self.resources.user_pool_clients.items() if CLI_CLIENT in lid)
        return next(found, None)

    def _bind_console(self) -> None:
        """Build the console (esbuild, offline; reused when unchanged) and bind its port."""
        if self._client_ids()[1] is None:
            return
        try:
            site = build_console()
        except ConsoleBuildError as error:
            self.options.log(f"console: not served ({error})")
            return
        port = self.options.console_port
        if port is None:
            port = self.options.port + 1 if _free(self.options.port + 1) else 0
        self._console = ConsoleFront(site, port=port)

    def _authorization_server(self) -> LocalAuthorizationServer | None:
        console_client, cli_client = self._client_ids()[1], self._cli_client_id()
        clients = [PublicClient(cli_client, CALLBACK_URLS)] if cli_client else []
        if self._console is not None and console_client is not None:
            url = self._console.url
            clients.append(PublicClient(console_client, (url,), (url,), (self._console.origin,)))
        if not clients:
            return None
        cognito = boto3.client("cognito-idp", endpoint_url=self.endpoint, region_name=REGION)
        pool = next(iter(self.resources.user_pools.values()))
        lock = threading.Lock()

        def signed_in(client_id: str, user: str, tenant: str | None) -> dict[str, Any]:
            with lock:  # one boto3 client, several front threads
                return sign_in(cognito, pool, client_id, user, tenant)

        def refreshed(client_id: str, refresh_token: str) -> dict[str, Any]:
            with lock:
                return refresh(cognito, client_id, refresh_token)

        return LocalAuthorizationServer(tuple(clients), signed_in, refreshed)

    def _start_console(self) -> None:
        console_client = self._client_ids()[1]
        if self._console is None or console_client is None:
            return
        api = self.front.url
        pool = next(iter(self.resources.user_pools.values()))
        config = {
            "apiUrl": api,
            "auth": {
                "issuer": f"https://cognito-idp.{REGION}.amazonaws.com/{pool}",
                "authorizeEndpoint": f"{api}/oauth2/authorize",
                "tokenEndpoint": f"{api}/oauth2/token",
                "logoutEndpoint": f"{api}/logout",
                "clientId": console_client,
                "redirectUri": self._console.url,
                "scopes": list(CONSOLE_SCOPES),
            },
        }
        connect = [api]
        if self._websocket is not None:
            connect.append(self._websocket.url.removesuffix(urllib.parse.urlsplit(self._websocket.url).path))
        self._console.configure(config, connect)
        self._console.start()

    # --- event source mappings, schedules, TTL ---------------------------------------------------

    def _start_mappings(self) -> None:
        for resource in self.template.resources("AWS::Lambda::EventSourceMapping"):
            properties = self.resolver.resolve(resource.properties)
            function_arn = self.function_arn(str(properties["FunctionName"]))
            source_arn = str(properties["EventSourceArn"])
            filters = [
                json.loads(f["Pattern"]) for f in properties.get("FilterCriteria", {}).get("Filters", [])
            ]
            item_failures = "ReportBatchItemFailures" in properties.get("FunctionResponseTypes", [])
            if ":dynamodb:" in source_arn:
                self._start_stream_mapping(resource, properties, function_arn, filters, item_failures)
            elif ":sqs:" in source_arn:
                self._start_queue_mapping(resource, properties, function_arn, item_failures)

    def _queue_url(self, arn: str) -> str:
        for logical_id, url in self.resources.queues.items():
            if self.resolver.attributes[(logical_id, "Arn")] == arn:
                return url
        raise KeyError(arn)

    def _start_stream_mapping(
        self,
        resource: Resource,
        properties: dict[str, Any],
        function_arn: str,
        filters: list[dict[str, Any]],
        item_failures: bool,
    ) -> None:
        destination = properties.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        # The mapping reads the stream and sends to its destination as the function, as in AWS.
        function = self.pools[function_arn].spec.logical_id
        sqs = self.iam.client(function, "sqs", self.endpoint)
        on_failure = None
        if destination:
            url = self._queue_url(str(destination))

            def on_failure(info: dict[str, Any]) -> None:
                sqs.send_message(QueueUrl=url, MessageBody=event_sources.dump(info))

        source = StreamSource(
            streams=self.iam.client(function, "dynamodbstreams", self.endpoint),
            stream_arn=str(properties["EventSourceArn"]),
            invoke=self.invoker(function_arn),
            batch_size=int(properties.get("BatchSize", 100)),
            filters=filters,
            max_retries=int(properties.get("MaximumRetryAttempts", 3)),
            on_failure=on_failure,
            report_item_failures=item_failures,
        )
        self.loops.append(_Loop(resource.logical_id, source.poll, 0.2, self.options.log).start())

    def _start_queue_mapping(
        self, resource: Resource, properties: dict[str, Any], function_arn: str, item_failures: bool
    ) -> None:
        source = SqsSource(
            # The mapping receives and deletes as the function, as in AWS.
            sqs=self.iam.client(self.pools[function_arn].spec.logical_id, "sqs", self.endpoint),
            queue_url=self._queue_url(str(properties["EventSourceArn"])),
            queue_arn=str(properties["EventSourceArn"]),
            invoke=self.invoker(function_arn),
            batch_size=int(properties.get("BatchSize", 10)),
            batching_window_seconds=float(properties.get("MaximumBatchingWindowInSeconds", 0)),
            report_item_failures=item_failures,
        )
        concurrency = int(properties.get("ScalingConfig", {}).get("MaximumConcurrency", LOCAL_CONCURRENCY))
        for index in range(min(concurrency, LOCAL_CONCURRENCY)):
            name = f"{resource.logical_id}-{index}"
            self.loops.append(_Loop(name, source.poll, 0.0, self.options.log).start())

    def _start_schedules(self) -> None:
        for resource in self.template.resources("AWS::Events::Rule"):
            properties = self.resolver.resolve(resource.properties)
            if "ScheduleExpression" not in properties or properties.get("State", "ENABLED") != "ENABLED":
                continue
            every = self.options.schedule_seconds or _rate_seconds(str(properties["ScheduleExpression"]))
            for target in properties.get("Targets", []):
                arn = str(target["Arn"])
                if arn not in self.pools:
                    continue
                self.scheduled.append(arn)
                invoke = self.invoker(arn)
                self.loops.append(
                    _Loop(
                        f"{resource.logical_id}-schedule",
                        _scheduled(invoke),
                        every,
                        self.options.log,
                    ).start()
                )

    def _start_reaper(self) -> None:
        dynamodb = boto3.client("dynamodb", endpoint_url=self.endpoint, region_name=REGION)
        tables = {
            self.resources.tables[lid]: attribute for lid, attribute in self.resources.table_ttl.items()
        }

        def reap() -> None:
            now = int(time.time())
            for table, attribute in tables.items():
                keys = [
                    k["AttributeName"] for k in dynamodb.describe_table(TableName=table)["Table"]["KeySchema"]
                ]
                paginator = dynamodb.get_paginator("scan")
                names = {"#ttl": attribute, **{f"#k{i}": key for i, key in enumerate(keys)}}
                pages = paginator.paginate(
                    TableName=table,
                    FilterExpression="#ttl < :now",
                    ProjectionExpression=", ".join(f"#k{i}" for i in range(len(keys))),
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues={":now": {"N": str(now)}},
                )
                for page in pages:
                    for item in page.get("Items", []):
                        dynamodb.delete_item(TableName=table, Key={k: item[k] for k in keys})

        self.loops.append(_Loop("ttl-reaper", reap, self.options.reap_seconds, self.options.log).start())

    # --- state and stop ------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """What clients of the running stack need: URLs, the user pool and the resources."""
        pools = list(self.resources.user_pools.values())
        api_client, console_client = self._client_ids()
        return {
            "pid": os.getpid(),
            "apiUrl": self.front.url,
            "websocketUrl": self.websocket_url,
            "awsEndpoint": self.endpoint,
            "modelUrl": self.model.url,
            "region": REGION,
            "userPoolId": pools[0] if pools else None,
            "userPoolClientId": api_client,
            "consoleClientId": console_client,
            "cliClientId": self._cli_client_id(),
            "consoleUrl": self.console_url,
            "tables": self.resources.tables,
            "queues": self.resources.queues,
            "buckets": self.resources.buckets,
            "secrets": self.resources.secrets,
            "functions": {pool.spec.logical_id: pool.spec.name for pool in self.pools.values()},
            "scheduled": [self.pools[arn].spec.logical_id for arn in self.scheduled],
            "chaos": self.options.chaos.to_dict() if self.options.chaos is not None else None,
            "iam": self.iam.describe(),
            "outputs": self._outputs(),
        }

    def _outputs(self) -> dict[str, Any]:
        """The template's outputs that resolve locally (names of local resources, stage settings)."""
        outputs: dict[str, Any] = {}
        for key, output in self.template.body.get("Outputs", {}).items():
            try:
                outputs[key] = self.resolver.resolve(output["Value"])
            except TemplateError:
                continue  # an attribute local mode does not model (e.g. the API's endpoint)
        return outputs

    def _write_state(self) -> None:
        STATE_DIR.mkdir(exist_ok=True)
        state_path(self.options.port).write_text(json.dumps(self.describe(), indent=2))

    def _stop_websocket(self) -> None:
        # After the pools close: each open connection's $disconnect then fails at once, not slowly.
        if self._console is not None:
            self._console.stop()
        if self._websocket is not None:
            self._websocket.stop()
        if self._management is not None:
            self._management.stop()

    def stop(self) -> None:
        """Stop everything started; leaves no process behind, and does not wait on each in turn."""
        for loop in self.loops:
            loop.stop()
        if self._front is not None:
            self._front.stop()
        # Every process is told to stop at once, then waited for: one slow exit does not queue the rest.
        if self.moto is not None and self.moto.poll() is None:
            self.moto.terminate()
        pools = [threading.Thread(target=pool.stop, daemon=True) for pool in self.pools.values()]
        for thread in pools:
            thread.start()
        self._stop_websocket()
        if self._model is not None:
            self._model.stop()
        deadline = time.monotonic() + 10
        for thread in pools:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        for loop in self.loops:
            loop.join(timeout=max(0.1, deadline - time.monotonic()))
        if self.moto is not None:
            try:
                self.moto.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.moto.kill()
                self.moto.wait(timeout=5)
        with contextlib.suppress(FileNotFoundError):
            state_path(self.options.port).unlink()


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _logical_id_from_target(resolved: str, raw: Any) -> str:
    # Target is Fn::Join ["", ["integrations/", {"Ref": Integration}]]: read the Ref from the raw form.
    if isinstance(raw, dict) and "Fn::Join" in raw:
        for part in raw["Fn::Join"][1]:
            if isinstance(part, dict) and "Ref" in part:
                return str(part["Ref"])
    return resolved.removeprefix("integrations/")


def _scheduled(invoke: Callable[[dict[str, Any]], Any]) -> Callable[[], Any]:
    return lambda: invoke(scheduled_event())
