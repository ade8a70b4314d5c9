"""The system in one process, for measuring: the real handlers against moto and the model server.

Resources come from the synthesized template, as in local mode (`outlast.local.provision`),
so tables, indexes, queues and each function's environment and memory are what `cdk deploy`
creates. The event source mappings are local mode's emulations (`outlast.local.event_sources`)
with the template's batch size and filter; they are driven by hand, one step at a time, so
every AWS call and log line can be attributed to the step that made it. This is the pattern
of tests/support/pipeline.py, with a meter on every client. The batch tier's two functions are
driven the same way: the batcher from its queue's mapping (`batch`), the poller as its schedule
would run it (`poll_batches`); the model server's Batch API ends a batch `batch_seconds` after
its creation.

Function stdout is replaced by a `LogCounter` before any handler is imported (Powertools binds
its log stream at import). Clients the handlers create come from boto3's default session, the
pollers' from a second watched session, and the meter's own reads from an unwatched one.

As in local mode, every call a handler or a poller makes is checked against the role of the
function it acts for (outlast.local.iam): one process hosts every function here, so the guard
checks against the function running now (the harness runs one at a time). `denials` records
what was denied; the benchmark says how many, and it must be 0.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, cast

import boto3

from infra.names import JOBS_QUEUE, JOBS_TABLE, OUTBOX, FunctionName
from outlast.bench.events import BenchContext, status_event, submit_event
from outlast.bench.meter import LogCounter, Meter
from outlast.local import event_sources
from outlast.local.capabilities.functions import LOCAL_FUNCTION_ENVIRONMENT
from outlast.local.event_sources import SqsSource, StreamSource, scheduled_event
from outlast.local.iam.denials import DenialLog
from outlast.local.iam.guard import Guard
from outlast.local.iam.roles import FunctionRole, function_roles, local_where
from outlast.local.model_server import ModelServer
from outlast.local.moto_server import MotoServer
from outlast.local.provision import LocalResources, Provisioner
from outlast.local.synth import PROJECT_ROOT, synthesize
from outlast.local.template import REGION, Resolver, Template

DEFAULT_CDK_OUT = PROJECT_ROOT / "cdk.out.local"
# In-process, one Powertools logger serves every function; its service name is this one's.
SHARED_SERVICE_NAME = FunctionName.SUBMIT.service
_KEY_ID, _SECRET = "bench", "bench"  # moto accepts any credentials


@dataclass(frozen=True)
class FunctionSpec:
    """One function of the template: handler module, memory, timeout and resolved environment."""

    name: str
    logical_id: str
    module: str
    memory_mb: int
    timeout_seconds: float
    environment: dict[str, str]
    handler: str
    code_dir: Path  # the code asset in the cloud assembly, as Lambda has it in /var/task
    log_format: str | None  # the template's LoggingConfig, which Lambda passes on as variables
    log_level: str | None
    system_log_level: str | None  # Lambda's own lines (START/END/REPORT are INFO)
    traced: bool  # active X-Ray tracing


@dataclass
class Invocation:
    """One handler invocation: when, how long, what it answered."""

    phase: str
    function: str
    started: float  # epoch seconds
    finished: float
    duration_seconds: float
    response: Any
    records: int = 1
    error: str | None = None

    @property
    def response_bytes(self) -> int:
        """Bytes of an API answer (body and headers) as the function returned it."""
        if not isinstance(self.response, dict) or "statusCode" not in self.response:
            return 0
        headers = self.response.get("headers") or {}
        return len(str(self.response.get("body") or "").encode()) + sum(
            len(k) + len(str(v)) + 4 for k, v in headers.items()
        )


@dataclass
class Harness:
    """Start with `start()`, stop with `stop()`; in between, invoke and pump step by step."""

    cdk_out: Path = DEFAULT_CDK_OUT
    log: Callable[[str], None] = lambda _line: None
    pass_name: str | None = None
    invocations: list[Invocation] = field(default_factory=list)
    functions: dict[str, FunctionSpec] = field(default_factory=dict)
    template: Template | None = None
    denials: DenialLog = field(
        default_factory=lambda: DenialLog(
            Path(tempfile.mkdtemp(prefix="outlast-bench-iam-")) / "denials.jsonl"
        )
    )
    # The local model server's Batch API completes a batch this long after its creation.
    batch_seconds: float = 1.0
    _roles: dict[str, FunctionRole] = field(default_factory=dict)
    _acting: list[str] = field(default_factory=list)  # the function running now (and its caller)

    def start(self) -> Harness:
        """moto, the model server, the template's resources, the watched sessions, the handlers."""
        self.moto = MotoServer().start()
        self.endpoint = self.moto.endpoint
        self.model = ModelServer(batch_seconds=self.batch_seconds).start()
        os.environ.update(
            {
                "AWS_ACCESS_KEY_ID": _KEY_ID,
                "AWS_SECRET_ACCESS_KEY": _SECRET,
                "AWS_REGION": REGION,
                "AWS_DEFAULT_REGION": REGION,
            }
        )
        for variable in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
            os.environ.pop(variable, None)
        self.log(f"synthesizing into {self.cdk_out} (reused when fresh)")
        self.template = synthesize(self.cdk_out)
        resolver = Resolver(self.template)
        self.resources: LocalResources = Provisioner(self.template, resolver, self.endpoint).provision()
        self._read_functions(resolver)
        os.environ.update(self._process_environment())
        self._sessions()
        self._enforce(resolver)
        self._mappings(resolver)
        self.handlers = {
            name: importlib.import_module(spec.module).lambda_handler for name, spec in self.functions.items()
        }
        return self

    def stop(self) -> None:
        """Put stdout back, take the guard off the default session, and stop the servers."""
        if getattr(self, "_stdout", None) is not None:
            sys.stdout = self._stdout
        if getattr(self, "_guard", None) is not None and boto3.DEFAULT_SESSION is not None:
            # What runs after the harness (the pipeline section) makes clients of its own there.
            self._guard.uninstall(boto3.DEFAULT_SESSION.events)
        self.model.stop()
        self.moto.stop()

    # --- setup -----------------------------------------------------------------------------

    def require_template(self) -> Template:
        """The synthesized template (after start)."""
        if self.template is None:
            raise RuntimeError("the harness is not started")
        return self.template

    def _read_functions(self, resolver: Resolver) -> None:
        by_handler = {name.handler: name for name in FunctionName}
        for resource in self.require_template().resources("AWS::Lambda::Function"):
            handler = str(resource.properties.get("Handler", ""))
            if handler not in by_handler:
                continue
            properties = resolver.resolve(resource.properties)
            variables = properties.get("Environment", {}).get("Variables", {})
            logging = properties.get("LoggingConfig", {})
            name = by_handler[handler].value
            self.functions[name] = FunctionSpec(
                name=name,
                logical_id=resource.logical_id,
                module=handler.rsplit(".", 1)[0],
                memory_mb=int(properties.get("MemorySize", 128)),
                timeout_seconds=float(properties.get("Timeout", 3)),
                environment={k: str(v) for k, v in variables.items()},
                handler=handler,
                code_dir=self.require_template().asset_path(resource),
                log_format=logging.get("LogFormat"),
                log_level=logging.get("ApplicationLogLevel"),
                system_log_level=logging.get("SystemLogLevel"),
                traced=properties.get("TracingConfig", {}).get("Mode") == "Active",
            )

    @property
    def jobs_table(self) -> str:
        """The jobs table's name."""
        return next(name for logical_id, name in self.resources.tables.items() if JOBS_TABLE in logical_id)

    def function_environment(self, name: str) -> dict[str, str]:
        """What the function gets locally: its template environment plus local mode's policy."""
        return {
            **self.functions[name].environment,
            **LOCAL_FUNCTION_ENVIRONMENT,
            "AWS_ENDPOINT_URL": self.endpoint,
            "OPENAI_BASE_URL": self.model.url,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": _KEY_ID,
            "AWS_SECRET_ACCESS_KEY": _SECRET,
        }

    def _process_environment(self) -> dict[str, str]:
        """Every function's environment at once (they agree on every key but the service name)."""
        merged: dict[str, str] = {}
        for name in self.functions:
            for key, value in self.function_environment(name).items():
                if key != "POWERTOOLS_SERVICE_NAME" and merged.get(key, value) != value:
                    raise RuntimeError(f"functions disagree on {key}; one process cannot host them all")
                merged[key] = value
        merged["POWERTOOLS_SERVICE_NAME"] = SHARED_SERVICE_NAME
        merged["POWERTOOLS_DEV"] = "false"  # pretty-printed logs would inflate the byte counts
        return merged

    def client(self, service: str, session: Any = None) -> Any:
        """A client on moto (by default from an unwatched session)."""
        session = session or boto3.session.Session(
            region_name=REGION, aws_access_key_id=_KEY_ID, aws_secret_access_key=_SECRET
        )
        return session.client(service, endpoint_url=self.endpoint)

    def _sessions(self) -> None:
        self.raw_dynamodb = self.client("dynamodb")
        self.meter = Meter(self.raw_dynamodb)
        self.logs = LogCounter(self.meter)
        self._stdout: TextIO | None = sys.stdout
        sys.stdout = cast(TextIO, self.logs)
        boto3.setup_default_session(region_name=REGION)
        self.meter.attach(boto3.DEFAULT_SESSION, "function")
        self.poller_session = boto3.session.Session(
            region_name=REGION, aws_access_key_id=_KEY_ID, aws_secret_access_key=_SECRET
        )
        self.meter.attach(self.poller_session, "poller")

    def _enforce(self, resolver: Resolver) -> None:
        """Check the handlers' and the pollers' calls against the role of the function acting."""
        where = local_where({}, self.resources.secrets)
        roles = {
            role.function: role
            for role in function_roles(self.require_template(), resolver, where, self.denials.path)
        }
        self._roles = {name: roles[spec.logical_id] for name, spec in self.functions.items()}
        self._guard = Guard(self._acting_role)
        if boto3.DEFAULT_SESSION is None:
            raise RuntimeError("the handlers' session is not set up")
        self._guard.install(boto3.DEFAULT_SESSION.events)
        self._guard.install(self.poller_session.events)

    def _acting_role(self) -> FunctionRole:
        if not self._acting:
            raise RuntimeError("an AWS call on a function's session while no function runs")
        return self._roles[self._acting[-1]]

    @contextlib.contextmanager
    def acting_as(self, name: str) -> Iterator[None]:
        """Calls made meanwhile are the function `name`'s (its handler, or the poller that feeds it)."""
        self._acting.append(name)
        try:
            yield
        finally:
            self._acting.pop()

    def _targets(self, mapping_properties: dict[str, Any], function: FunctionName) -> bool:
        """True when an event source mapping invokes `function` (its FunctionName is a Ref to it)."""
        target = mapping_properties.get("FunctionName", {})
        spec = self.functions.get(function.value)
        return spec is not None and isinstance(target, dict) and target.get("Ref") == spec.logical_id

    def _queue_url(self, arn: str) -> str:
        for logical_id, url in self.resources.queues.items():
            if self.sqs_arn(logical_id) == arn:
                return url
        raise KeyError(arn)

    def sqs_arn(self, logical_id: str) -> str:
        """A queue's ARN by logical id."""
        client = self.client("sqs")
        attributes = client.get_queue_attributes(
            QueueUrl=self.resources.queues[logical_id], AttributeNames=["QueueArn"]
        )
        return str(attributes["Attributes"]["QueueArn"])

    def _mappings(self, resolver: Resolver) -> None:
        for resource in self.require_template().resources("AWS::Lambda::EventSourceMapping"):
            properties = resolver.resolve(resource.properties)
            source_arn = str(properties["EventSourceArn"])
            filters = [
                json.loads(f["Pattern"]) for f in properties.get("FilterCriteria", {}).get("Filters", [])
            ]
            if ":dynamodb:" in source_arn and self._targets(resource.properties, FunctionName.RELAY):
                # The relay's stream (the notifier reads the same one; the output pusher its own table's).
                self.relay_source = StreamSource(
                    streams=self.poller_session.client("dynamodbstreams", endpoint_url=self.endpoint),
                    stream_arn=source_arn,
                    invoke=self._invoker(FunctionName.RELAY.value),
                    batch_size=int(properties.get("BatchSize", 100)),
                    filters=filters,
                )
            elif ":sqs:" in source_arn and _is_jobs_queue(resource.properties):
                # The jobs queue's trigger; the isolation queue's (one job per invocation after a
                # crash) never sees a benchmark job.
                self.jobs_queue_url = self._queue_url(source_arn)
                self.worker_batch_size = int(properties.get("BatchSize", 10))
                self.worker_source = SqsSource(
                    sqs=self.poller_session.client("sqs", endpoint_url=self.endpoint),
                    queue_url=self.jobs_queue_url,
                    queue_arn=source_arn,
                    invoke=self._invoker(FunctionName.WORKER.value),
                    batch_size=self.worker_batch_size,
                    # Long enough to gather a full batch that is already waiting on the queue.
                    batching_window_seconds=1.0,
                )
            elif ":sqs:" in source_arn and self._targets(resource.properties, FunctionName.BATCHER):
                # The batcher's queue: the calls of batch-tier jobs that the worker handed over.
                self.batcher_source = SqsSource(
                    sqs=self.poller_session.client("sqs", endpoint_url=self.endpoint),
                    queue_url=self._queue_url(source_arn),
                    queue_arn=source_arn,
                    invoke=self._invoker(FunctionName.BATCHER.value),
                    batch_size=int(properties.get("BatchSize", 10)),
                    batching_window_seconds=1.0,  # as the worker's: what is waiting is all there
                )

    # --- invoking --------------------------------------------------------------------------

    def _invoker(self, name: str) -> Callable[[dict[str, Any]], Any]:
        def invoke(event: dict[str, Any]) -> Any:
            invocation = self.invoke(name, event)
            if invocation.error is not None:
                raise event_sources.FunctionError(invocation.error)
            return invocation.response

        return invoke

    def invoke(self, name: str, event: dict[str, Any]) -> Invocation:
        """Run one handler like Lambda would, under its own phase; never raises for the handler."""
        spec = self.functions[name]
        phase = f"{self.pass_name or 'unmetered'}/{name}/{len(self.invocations)}"
        # Names as CloudFormation generates them, and a trace header as Lambda sets it: both end
        # up in every Powertools log line, so they count toward the log bytes.
        function_name = f"outlast-{spec.logical_id}-{uuid.uuid4().hex[:12]}"[:64]
        context = BenchContext(
            function_name=function_name,
            invoked_function_arn=f"arn:aws:lambda:{REGION}:123456789012:function:{function_name}",
            memory_limit_in_mb=spec.memory_mb,
            timeout_seconds=spec.timeout_seconds,
        )
        os.environ["_X_AMZN_TRACE_ID"] = (
            f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};Parent={uuid.uuid4().hex[:16]};Sampled=0"
        )
        response, error = None, None
        started, begin = time.time(), time.perf_counter()
        with self.meter.phase(phase) if self.pass_name else contextlib.nullcontext(), self.acting_as(name):
            try:
                response = self.handlers[name](event, context)
            except Exception as failure:  # noqa: BLE001 - recorded: the caller decides what it means
                error = type(failure).__name__
        duration = time.perf_counter() - begin
        invocation = Invocation(
            phase=phase,
            function=name,
            started=started,
            finished=started + duration,
            duration_seconds=duration,
            response=response,
            records=len(event.get("Records", [])) or 1,
            error=error,
        )
        self.invocations.append(invocation)
        return invocation

    def submit(self, text: str, sub: str, options: dict[str, Any] | None = None) -> str:
        """Submit a summarize job (with these options, if any) through the submit handler; its id."""
        body: dict[str, Any] = {"operation": "summarize", "input": {"text": text}}
        if options:
            body["options"] = options
        invocation = self.invoke("submit", submit_event(body, key=f"bench-{uuid.uuid4()}", sub=sub))
        if invocation.error or invocation.response["statusCode"] != 202:
            raise RuntimeError(f"submit failed: {invocation.error or invocation.response}")
        job_id: str = json.loads(invocation.response["body"])["jobId"]
        return job_id

    def status(self, job_id: str, sub: str) -> dict[str, Any]:
        """The job's status document through the status handler."""
        invocation = self.invoke("status", status_event(job_id, sub=sub))
        if invocation.error or invocation.response["statusCode"] != 200:
            raise RuntimeError(f"status failed: {invocation.error or invocation.response}")
        document: dict[str, Any] = json.loads(invocation.response["body"])
        return document

    def relay(self) -> int:
        """One poll of the stream: the relay runs on whatever new job INSERTs there are."""
        return self._polled(FunctionName.RELAY, self.relay_source.poll)

    def work(self) -> int:
        """One poll of the jobs queue: the worker runs on one batch (up to its batch size)."""
        return self._polled(FunctionName.WORKER, lambda: self.worker_source.poll(idle_sleep=0))

    def batch(self) -> int:
        """One poll of the batcher's queue: the batcher runs on the calls handed over (up to its
        batch size)."""
        return self._polled(FunctionName.BATCHER, lambda: self.batcher_source.poll(idle_sleep=0))

    def _polled(self, function: FunctionName, poll: Callable[[], int]) -> int:
        """A mapping's poll, metered under the pass and acting as the function it feeds."""
        with (
            self.meter.phase(f"{self.pass_name}/poller-{function.value}")
            if self.pass_name
            else contextlib.nullcontext(),
            self.acting_as(function.value),
        ):
            return poll()

    def poll_batches(self) -> Invocation:
        """One scheduled run of the batch poller (EventBridge's event, as for the sweeper)."""
        return self.invoke(FunctionName.BATCH_POLLER.value, scheduled_event())

    # --- the model server ------------------------------------------------------------------

    def _model(self, path: str, method: str = "GET") -> Any:
        base = self.model.url.removesuffix("/v1")
        request = urllib.request.Request(base + path, method=method)  # noqa: S310 - loopback
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
            return json.loads(response.read())

    def model_calls(self) -> list[dict[str, Any]]:
        """Every chat call the model server finished since the last reset."""
        calls: list[dict[str, Any]] = self._model("/_calls")
        return calls

    def reset_model_calls(self) -> None:
        """Clear the model server's call log."""
        self._model("/_calls/reset", method="POST")


def model_wait_seconds(calls: list[dict[str, Any]], started: float, finished: float) -> float:
    """Seconds of [started, finished] during which at least one model call was in flight."""
    windows = sorted(
        (max(started, float(c["started"])), min(finished, float(c["finished"])))
        for c in calls
        if float(c["finished"]) > started and float(c["started"]) < finished
    )
    total, current_start, current_end = 0.0, None, None
    for start, end in windows:
        if current_end is None or start > current_end:
            if current_start is not None and current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_start is not None and current_end is not None:
        total += current_end - current_start
    return total


def max_overlap(calls: list[dict[str, Any]]) -> int:
    """The most model calls in flight at once."""
    edges = sorted(
        [(float(c["started"]), 1) for c in calls] + [(float(c["finished"]), -1) for c in calls],
        key=lambda edge: (edge[0], edge[1]),
    )
    best = current = 0
    for _, step in edges:
        current += step
        best = max(best, current)
    return best


def _is_jobs_queue(mapping_properties: dict[str, Any]) -> bool:
    """True for the mapping whose source is the jobs queue (`{"Fn::GetAtt": [logical id, "Arn"]}`)."""
    source = mapping_properties.get("EventSourceArn", {})
    logical_id = str(source.get("Fn::GetAtt", [""])[0]) if isinstance(source, dict) else ""
    return logical_id.startswith(OUTBOX + JOBS_QUEUE)
