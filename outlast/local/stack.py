"""`outlast local up`: the whole system on one machine, built from the synthesized template.

This module is the composition root: it synthesizes the template, starts one starter per
capability (outlast.local.capabilities, each named after the construct of infra/constructs/ it
emulates), hands each what the ones before it made, writes the state file, and stops them all.

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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from outlast.local.capabilities.api import Api
from outlast.local.capabilities.base import Starter
from outlast.local.capabilities.console import Console
from outlast.local.capabilities.documents import Documents
from outlast.local.capabilities.functions import Functions, Invoke
from outlast.local.capabilities.mappings import Mappings
from outlast.local.capabilities.provider import ModelProvider
from outlast.local.capabilities.realtime import Realtime
from outlast.local.capabilities.schedules import Schedules
from outlast.local.capabilities.storage import Storage
from outlast.local.fault_hook import FaultHook
from outlast.local.http_front import ApiFront
from outlast.local.iam.enforcement import Enforcement
from outlast.local.lambda_runtime import FunctionPool
from outlast.local.model_server import ModelServer
from outlast.local.provision import LocalResources
from outlast.local.synth import PROJECT_ROOT, synthesize
from outlast.local.template import REGION, Resolver, Template, TemplateError

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
    # The local model server's Batch API completes a batch this long after its creation; None:
    # its default (a few seconds).
    batch_seconds: float | None = None
    # moto never expires items; the reaper scans under moto's one lock, so not too often.
    reap_seconds: float = 30.0
    verbose: bool = False
    # Wrap every function's handler with a module the caller names (outlast.local.fault_hook).
    fault_hook: FaultHook | None = None
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


class LocalStack:
    """Starts and stops every local piece; `start()` returns once the API answers."""

    def __init__(self, options: LocalOptions) -> None:
        self.options = options
        self._template: Template | None = None
        self._resolver: Resolver | None = None
        log = options.log
        logs = log_dir(options.port)
        self._storage = Storage(logs, options.reap_seconds, log)
        self._provider = ModelProvider(options.batch_seconds)
        self._realtime = Realtime(port=options.ws_port, logs=logs, verbose=options.verbose, log=log)
        self._console = Console(log)
        self._functions = Functions(
            logs=logs,
            roles=iam_dir(options.port),
            environment=options.environment,
            fault_hook=options.fault_hook,
            verbose=options.verbose,
            log=log,
        )
        self._api = Api(options.port)
        self._mappings = Mappings(log)
        self._documents = Documents(log)
        self._schedules = Schedules(options.schedule_seconds, log)

    # --- what the pieces are, once started ------------------------------------------------------

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
    def resources(self) -> LocalResources:
        """Physical names of the resources created in moto (after start)."""
        return self._storage.resources

    @property
    def endpoint(self) -> str:
        """moto's endpoint (after start)."""
        return self._storage.endpoint

    @property
    def model(self) -> ModelServer:
        """The local model server (after start)."""
        if self._provider.server is None:
            raise RuntimeError("the local stack is not started")
        return self._provider.server

    @property
    def iam(self) -> Enforcement:
        """Every function's role, enforced (after start)."""
        return self._functions.iam

    @property
    def pools(self) -> dict[str, FunctionPool]:
        """Each function's pool of processes, by ARN (after start)."""
        return self._functions.pools

    @property
    def front(self) -> ApiFront:
        """The HTTP front (after start)."""
        return self._api.front

    @property
    def websocket_url(self) -> str | None:
        """The local WebSocket stage's URL (after start), or None when the template has no WebSocket API."""
        return self._realtime.url

    @property
    def console_url(self) -> str | None:
        """The console's URL (after start), or None when it is not served (not built, no client)."""
        return self._console.url

    def invoker(self, function_arn: str, max_wait: float | None = None) -> Invoke:
        """Invoke a function by ARN; a function failure becomes the pollers' FunctionError."""
        return self._functions.invoker(function_arn, max_wait)

    def function_arn(self, name_or_logical_id: str) -> str:
        """A local function's ARN from its logical id, physical name or a prefix of either."""
        return self._functions.function_arn(name_or_logical_id)

    # --- start and stop -------------------------------------------------------------------------

    def start(self) -> LocalStack:
        """Synthesize (or reuse cdk.out), start moto, create resources, start functions and fronts."""
        self.options.log("synthesizing the CDK app (reused when fresh)...")
        template = self._template = synthesize(self.options.cdk_out, self.options.context)
        log_dir(self.options.port).mkdir(parents=True, exist_ok=True)
        resolver = self._resolver = Resolver(template)
        storage = self._storage.start(template, resolver)
        self._provider.start()
        # Bound before the functions start: their environment and roles name these endpoints.
        realtime = self._realtime.bind(template, resolver)
        console = self._console.bind(storage.resources, self.options.console_port, self.options.port)
        documents = self._documents.bind(endpoint=storage.endpoint, iam=lambda: self._functions.iam)
        functions = self._functions.start(
            template,
            resolver,
            endpoint=storage.endpoint,
            resources=storage.resources,
            model_url=self._provider.url,
            local_urls=realtime.local_urls,
            stages=realtime.stages,
            by_handler=documents.function_environment(),
        )
        api = self._api.start(
            template,
            resolver,
            functions=functions,
            endpoint=storage.endpoint,
            console_origin=console.origin,
            local=console.authorization_server(storage.endpoint),
        )
        console.start(api.front.url, realtime.url, documents.url)
        realtime.start(template, resolver, functions)
        documents.start(template, resolver, storage.endpoint, console.origin)
        self._mappings.start(
            template, resolver, functions=functions, resources=storage.resources, endpoint=storage.endpoint
        )
        self._schedules.start(template, resolver, functions)
        self._write_state()
        return self

    def _in_stop_order(self) -> list[Starter]:
        """Every starter, in the order each stop pass visits them (each is safe to stop unstarted).

        The pollers and schedules first, so nothing new is invoked; moto, then the function pools;
        the WebSocket front after the pools, so that each open connection's $disconnect fails at
        once instead of running; the model server last, waking any call it still holds."""
        return [
            self._mappings,
            self._schedules,
            self._storage,
            self._functions,
            self._api,
            self._documents,
            self._console,
            self._realtime,
            self._provider,
        ]

    def stop(self) -> None:
        """Stop everything started; leaves no process behind, and does not wait on each in turn."""
        starters = self._in_stop_order()
        for starter in starters:
            starter.stop_intake()  # no new work: pollers, schedules, the HTTP front
        for starter in starters:
            starter.stop()  # every process and server told at once: one slow exit queues no other
        deadline = time.monotonic() + 10
        for starter in starters:
            starter.join(deadline)
        with contextlib.suppress(FileNotFoundError):
            state_path(self.options.port).unlink()

    # --- the state file -------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """What clients of the running stack need: URLs, the user pool and the resources."""
        resources = self.resources
        pools = list(resources.user_pools.values())
        clients = self._console.clients
        return {
            "pid": os.getpid(),
            "apiUrl": self.front.url,
            "websocketUrl": self.websocket_url,
            "awsEndpoint": self.endpoint,
            "modelUrl": self.model.url,
            "region": REGION,
            "userPoolId": pools[0] if pools else None,
            "userPoolClientId": clients.api,
            "consoleClientId": clients.console,
            "cliClientId": clients.cli,
            "consoleUrl": self.console_url,
            "tables": resources.tables,
            "queues": resources.queues,
            "buckets": resources.buckets,
            "secrets": resources.secrets,
            "functions": self._functions.names(),
            "scheduled": [self._functions.logical_id(arn) for arn in self._schedules.scheduled],
            "chaos": self.options.fault_hook.description if self.options.fault_hook is not None else None,
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
