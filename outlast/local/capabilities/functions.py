"""The functions, emulated: every Lambda function of the template in its own processes, under its role.

Emulates the functions every construct makes (infra/function_factory.py builds them: api.py's
submit and status, worker.py, outbox.py's relay, sweeper.py, realtime.py's, webhooks.py's,
budgets.py's, batch.py's batcher and poller): each runs its template handler string from its
cdk.out asset in awslambdaric processes (outlast.local.lambda_runtime), with its template
environment resolved to the local resources, and its role from the template enforced on every
call it makes (outlast.local.iam; DESIGN.md, "Deploy fidelity"). The other starters invoke
functions through `invoker` and `integration`, never through a pool directly.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from outlast.local import event_sources
from outlast.local.capabilities.base import Log, Loops, file_log, remaining
from outlast.local.fault_hook import FaultHook
from outlast.local.iam.enforcement import Enforcement
from outlast.local.iam.roles import local_where
from outlast.local.lambda_runtime import FunctionError, FunctionPool, FunctionSpec, host_environment
from outlast.local.provision import LocalResources
from outlast.local.template import REGION, Resolver, Resource, Template
from outlast.local.websocket_template import localize
from shared import resources as r

# Local policy on top of the template (DESIGN.md, "Local mode"): backoff from 1 s doubling to
# 20 s, a 5 s provider timeout (10 s for a flex call), and no X-Ray daemon to send traces to.
LOCAL_FUNCTION_ENVIRONMENT = {
    "BACKOFF_BASE_SECONDS": "1",
    "BACKOFF_CAP_SECONDS": "20",
    "PROVIDER_TIMEOUT_SECONDS": "5",
    "FLEX_TIMEOUT_SECONDS": "10",
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

Invoke = Callable[[dict[str, Any]], Any]


class Functions(Loops):
    """A pool of processes per function, each function's role enforced (and its denials logged)."""

    def __init__(
        self,
        *,
        logs: Path,
        roles: Path,
        environment: Mapping[str, str],
        fault_hook: FaultHook | None,
        verbose: bool,
        log: Log,
    ) -> None:
        super().__init__()
        self._logs = logs
        self._roles = roles
        self._environment = environment
        self._fault_hook = fault_hook
        self._verbose = verbose
        self._log = log
        self.pools: dict[str, FunctionPool] = {}
        self._iam: Enforcement | None = None
        self._stopping: list[threading.Thread] = []

    @property
    def iam(self) -> Enforcement:
        """Every function's role, enforced (after start)."""
        if self._iam is None:
            raise RuntimeError("the functions are not started")
        return self._iam

    def start(
        self,
        template: Template,
        resolver: Resolver,
        *,
        endpoint: str,
        resources: LocalResources,
        model_url: str,
        local_urls: Mapping[str, str],
        stages: dict[str, tuple[str, str]],
        by_handler: Mapping[str, Mapping[str, str]] | None = None,
    ) -> Functions:
        """Enforce every role, then make each function's pool (environments start on first invoke).

        `by_handler`: local-only variables for the functions with that handler string (the upload
        front's URL for the documents function)."""
        # Always on: no function runs with broader credentials than its role.
        where = local_where(stages, resources.secrets)
        self._iam = Enforcement(template, resolver, self._roles, where, self._log)
        self.run("iam", self._iam.poll, 0.5, self._log)
        base = {
            **host_environment(),
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,  # boto3 reads this one; Lambda sets both
            "AWS_ENDPOINT_URL": endpoint,
            "OPENAI_BASE_URL": model_url,
        }
        for resource in template.resources("AWS::Lambda::Function"):
            if not str(resource.properties.get("Handler", "")).startswith("functions."):
                continue  # CDK's own helper functions (custom resources, the console's deployment)
            spec = self._spec(template, resolver, resource, local_urls, by_handler or {})
            echo = _prefixed(self._log, f"[{spec.name}] ") if self._verbose else None
            log = file_log(self._logs / f"{spec.logical_id}.log", echo)
            self.pools[spec.arn] = FunctionPool(spec, base, log)
        return self

    def _spec(
        self,
        template: Template,
        resolver: Resolver,
        resource: Resource,
        local_urls: Mapping[str, str],
        by_handler: Mapping[str, Mapping[str, str]],
    ) -> FunctionSpec:
        properties = resolver.resolve(resource.properties)
        variables = {
            k: localize(str(v), dict(local_urls))
            for k, v in properties.get("Environment", {}).get("Variables", {}).items()
        }
        local_only = {k: v for k, v in LOCAL_ONLY_OVERRIDES.items() if k in variables}
        environment = {
            **variables,
            **LOCAL_FUNCTION_ENVIRONMENT,
            **local_only,
            **by_handler.get(str(properties["Handler"]), {}),
            **self._environment,
            **self.iam.environment(resource.logical_id),
        }
        handler = str(properties["Handler"])
        if self._fault_hook is not None:
            handler, environment = self._fault_hook.apply(handler, environment)
        return FunctionSpec(
            logical_id=resource.logical_id,
            name=str(resolver.ref(resource.logical_id)),
            handler=handler,
            code_dir=template.asset_path(resource),
            environment=environment,
            timeout_seconds=float(properties.get("Timeout", 3)),
            memory_mb=int(properties.get("MemorySize", 128)),
            concurrency=LOCAL_CONCURRENCY,
            entry="outlast.local.iam.bootstrap",
        )

    def invoker(self, function_arn: str, max_wait: float | None = None) -> Invoke:
        """Invoke a function by ARN; a function failure becomes the pollers' FunctionError."""
        pool = self.pools[function_arn]

        def invoke(event: dict[str, Any]) -> Any:
            try:
                return pool.invoke(event, max_wait)
            except FunctionError as error:
                self._log(f"[{pool.spec.name}] invocation failed: {error.error_type}")
                raise event_sources.FunctionError(error.error_type) from error

        return invoke

    def integration(self, uri: str) -> Invoke:
        """Invoke the function an API Gateway integration names, as API Gateway would: given up after 30 s."""
        # An integration URI may be the function ARN or the apigateway invoke path around it.
        found = re.search(r"arn:aws:lambda:[^/]+:function:[^/]+?(?=/invocations|$)", uri)
        return self.invoker(found.group(0) if found else uri, max_wait=INTEGRATION_TIMEOUT_SECONDS)

    def function_arn(self, name_or_logical_id: str) -> str:
        """A local function's ARN from its logical id, physical name or a prefix of either."""
        for arn, pool in self.pools.items():
            spec = pool.spec
            if name_or_logical_id in {spec.logical_id, spec.name} or spec.logical_id.startswith(
                name_or_logical_id
            ):
                return arn
        raise KeyError(name_or_logical_id)

    def logical_id(self, function_arn: str) -> str:
        """The template's logical id of a local function."""
        return self.pools[function_arn].spec.logical_id

    def names(self) -> dict[str, str]:
        """Each function's physical name, by logical id (for the state file)."""
        return {pool.spec.logical_id: pool.spec.name for pool in self.pools.values()}

    def stop(self) -> None:
        # Every pool is told to stop at once, then waited for: one slow exit does not queue the rest.
        self._stopping = [threading.Thread(target=pool.stop, daemon=True) for pool in self.pools.values()]
        for thread in self._stopping:
            thread.start()

    def join(self, deadline: float) -> None:
        for thread in self._stopping:
            thread.join(timeout=remaining(deadline))
        super().join(deadline)


def _prefixed(log: Log, prefix: str) -> Log:
    return lambda line: log(prefix + line)
