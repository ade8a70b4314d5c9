"""Lambda functions as separate processes: awslambdaric's real bootstrap against our Runtime API.

Each execution environment is one process with its own small Lambda Runtime API server, so
a killed process can never take an event meant for another (one event at a time, like
Lambda). A pool per function spawns environments on demand up to the function's concurrency,
reuses warm ones, and replaces one that timed out or crashed.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

from outlast.local.http_handler import LocalRequestHandler

_API = "/2018-06-01/runtime"


class FunctionError(Exception):
    """The function raised, timed out or could not start; Lambda reports these as failed invokes."""

    def __init__(self, error_type: str, message: str = "") -> None:
        super().__init__(f"{error_type}: {message}" if message else error_type)
        self.error_type = error_type


@dataclass(frozen=True)
class FunctionSpec:
    """What local mode needs to run one function of the template."""

    logical_id: str
    name: str
    handler: str
    code_dir: Path
    environment: dict[str, str]
    timeout_seconds: float
    memory_mb: int
    concurrency: int = 2
    # The module the process runs with the handler string as its argument: awslambdaric itself, or
    # a bootstrap that prepares the process first and then runs it (outlast.local.iam.bootstrap).
    entry: str = "awslambdaric"

    @property
    def arn(self) -> str:
        """The function's ARN, as Fn::GetAtt Arn gives it."""
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.name}"


# Lambda gives a cold start its own init budget (10 s); locally, on a loaded two-core machine,
# importing a function can take longer, and that must not eat into the invocation's timeout.
INIT_TIMEOUT_SECONDS = 60.0


@dataclass
class _Invocation:
    request_id: str
    payload: bytes
    timeout_seconds: float
    trace_id: str
    deadline_ms: int = 0  # set when the runtime takes the event: the clock starts after init
    taken: threading.Event = field(default_factory=threading.Event)
    result: queue.Queue[tuple[str, bytes]] = field(default_factory=lambda: queue.Queue(maxsize=1))


class _RuntimeHandler(LocalRequestHandler):
    """The Runtime API's three calls: next event, response or error, init error."""

    server: _RuntimeServer

    def _send(self, status: int, body: bytes = b"", headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        api = self.server.api
        if self.path != f"{_API}/invocation/next":
            self._send(404)
            return
        invocation = api.next_event.get()  # the long poll: blocks until there is work
        if invocation is None:
            self._send(410)
            return
        api.in_flight[invocation.request_id] = invocation
        invocation.deadline_ms = int((time.time() + invocation.timeout_seconds) * 1000)
        invocation.taken.set()
        self._send(
            200,
            invocation.payload,
            {
                "Content-Type": "application/json",
                "Lambda-Runtime-Aws-Request-Id": invocation.request_id,
                "Lambda-Runtime-Deadline-Ms": str(invocation.deadline_ms),
                "Lambda-Runtime-Invoked-Function-Arn": api.function_arn,
                "Lambda-Runtime-Trace-Id": invocation.trace_id,
            },
        )

    def do_POST(self) -> None:
        api = self.server.api
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path == f"{_API}/init/error":
            api.init_error = (self.headers.get("Lambda-Runtime-Function-Error-Type") or "InitError", body)
            api.init_failed.set()
            self._send(202, b'{"status":"OK"}')
            return
        parts = self.path.split("/")  # ['', '2018-06-01', 'runtime', 'invocation', id, kind]
        if len(parts) == 6 and parts[3] == "invocation" and parts[5] in {"response", "error"}:
            invocation = api.in_flight.pop(parts[4], None)
            if invocation is not None:
                invocation.result.put((parts[5], body))
            self._send(202, b'{"status":"OK"}')
            return
        self._send(404)


class _RuntimeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, api: _RuntimeApi) -> None:
        super().__init__(("127.0.0.1", 0), _RuntimeHandler)
        self.api = api

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a killed function process drops its connection: normal here


class _RuntimeApi:
    """One environment's Runtime API: hands out its next event, collects the answer."""

    def __init__(self, function_arn: str) -> None:
        self.function_arn = function_arn
        self.next_event: queue.Queue[_Invocation | None] = queue.Queue()
        self.in_flight: dict[str, _Invocation] = {}
        self.init_error: tuple[str, bytes] | None = None
        self.init_failed = threading.Event()
        self.server = _RuntimeServer(self)
        self.thread = threading.Thread(target=self.server.serve_forever, name="runtime-api", daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host!s}:{port}"

    def close(self) -> None:
        self.next_event.put(None)
        self.server.shutdown()
        self.server.server_close()


def _trace_id() -> str:
    return f"Root=1-{int(time.time()):08x}-{secrets.token_hex(12)};Parent={secrets.token_hex(8)};Sampled=0"


class ExecutionEnvironment:
    """One function process, started cold, reused warm, replaced when it dies or times out."""

    def __init__(
        self, spec: FunctionSpec, base_environment: Mapping[str, str], log: Callable[[str], None]
    ) -> None:
        self.spec = spec
        self._api = _RuntimeApi(spec.arn)
        environment = {
            **base_environment,
            **spec.environment,
            "AWS_LAMBDA_RUNTIME_API": self._api.address,
            "_HANDLER": spec.handler,
            "LAMBDA_TASK_ROOT": str(spec.code_dir),
            "AWS_LAMBDA_FUNCTION_NAME": spec.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{spec.name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": f"local/{uuid.uuid4().hex[:8]}",
            "PYTHONPATH": str(spec.code_dir),
            "PYTHONUNBUFFERED": "1",
        }
        self.process: subprocess.Popen[str] = spawn(
            lambda: subprocess.Popen(  # noqa: S603 - our own interpreter and the template's handler
                guarded([sys.executable, "-m", spec.entry, spec.handler]),
                cwd=spec.code_dir,
                env=environment,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
        self._log_thread = threading.Thread(
            target=self._forward_logs, args=(self.process.stdout, log), daemon=True
        )
        self._log_thread.start()

    @staticmethod
    def _forward_logs(stream: IO[str] | None, log: Callable[[str], None]) -> None:
        if stream is None:
            return
        for line in stream:
            log(line.rstrip("\n"))

    @property
    def alive(self) -> bool:
        """True while the process runs and has not failed its init."""
        return self.process.poll() is None and not self._api.init_failed.is_set()

    def invoke(self, event: Any, timeout_seconds: float) -> Any:
        """Run one event; the function's response, or FunctionError."""
        invocation = _Invocation(
            request_id=str(uuid.uuid4()),
            payload=json.dumps(event).encode(),
            timeout_seconds=timeout_seconds,
            trace_id=_trace_id(),
        )
        self._api.next_event.put(invocation)
        self._wait(invocation.taken.is_set, INIT_TIMEOUT_SECONDS, "Init timed out")
        deadline = time.monotonic() + timeout_seconds
        outcome: list[tuple[str, bytes]] = []

        def answered() -> bool:
            try:
                outcome.append(invocation.result.get_nowait())
            except queue.Empty:
                return False
            return True

        self._wait(answered, deadline - time.monotonic(), "Task timed out")
        kind, body = outcome[0]
        if kind == "error":
            error = _error_payload(body)
            raise FunctionError(str(error.get("errorType", "Error")), str(error.get("errorMessage", "")))
        return json.loads(body) if body else None

    def _wait(self, done: Callable[[], bool], seconds: float, timeout_error: str) -> None:
        """Poll until `done()`; a dead process, a failed init or the timeout end the wait."""
        deadline = time.monotonic() + seconds
        while not done():
            if self._api.init_failed.is_set():
                error_type, detail = self._api.init_error or ("InitError", b"")
                self.stop()
                raise FunctionError(error_type, _error_message(detail))
            if self.process.poll() is not None:
                raise FunctionError("Runtime.ExitError", f"exit code {self.process.returncode}")
            if time.monotonic() > deadline:
                # Lambda kills an environment that overran; so do we (the next one starts cold).
                self.stop()
                raise FunctionError(timeout_error, f"after {seconds:.0f} seconds")
            time.sleep(0.02)

    def terminate(self) -> None:
        """Ask the process to stop without waiting for it."""
        if self.process.poll() is None:
            self.process.terminate()

    def stop(self) -> None:
        """Terminate the process and its Runtime API."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=3)
        self._api.close()


def _error_payload(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def _error_message(body: bytes) -> str:
    return str(_error_payload(body).get("errorMessage", ""))


class FunctionPool:
    """A function's environments: warm ones are reused, new ones start up to its concurrency."""

    def __init__(
        self, spec: FunctionSpec, base_environment: Mapping[str, str], log: Callable[[str], None]
    ) -> None:
        self.spec = spec
        self._base = dict(base_environment)
        self._log = log
        self._idle: list[ExecutionEnvironment] = []
        self._all: list[ExecutionEnvironment] = []
        self._available = threading.Condition()
        self._closed = False

    def _acquire(self, max_wait: float | None) -> ExecutionEnvironment:
        deadline = None if max_wait is None else time.monotonic() + max_wait
        with self._available:
            while True:
                if self._closed:
                    raise FunctionError("Local.Stopped", "local mode is stopping")
                self._all = [env for env in self._all if env.alive or env in self._idle]
                while self._idle:
                    environment = self._idle.pop()
                    if environment.alive:
                        return environment
                    self._all.remove(environment)
                if len(self._all) < self.spec.concurrency:
                    environment = ExecutionEnvironment(self.spec, self._base, self._log)
                    self._all.append(environment)
                    return environment
                if deadline is not None and time.monotonic() > deadline:
                    raise FunctionError("Local.Busy", f"no free environment within {max_wait:.0f} s")
                self._available.wait(timeout=1)

    def _release(self, environment: ExecutionEnvironment) -> None:
        with self._available:
            if environment.alive and not self._closed:
                self._idle.append(environment)
            else:
                with contextlib.suppress(ValueError):
                    self._all.remove(environment)
                environment.stop()
            self._available.notify()

    def invoke(self, event: Any, max_wait: float | None = None) -> Any:
        """Run one event on a warm environment if there is one (a cold start otherwise).

        `max_wait` bounds the wait for a free environment (a synchronous caller such as API
        Gateway gives up); pollers wait as long as it takes, as Lambda's event sources do.
        """
        environment = self._acquire(max_wait)
        try:
            return environment.invoke(event, self.spec.timeout_seconds)
        finally:
            self._release(environment)

    def stop(self) -> None:
        """Stop every environment at once; invocations in progress fail."""
        with self._available:
            self._closed = True
            environments, self._all, self._idle = list(self._all), [], []
            self._available.notify_all()
        for environment in environments:
            environment.terminate()
        for environment in environments:
            environment.stop()


def guarded(command: list[str]) -> list[str]:
    """COMMAND run so that it ends when this process dies (see outlast.local.orphan_guard)."""
    return [sys.executable, "-m", "outlast.local.orphan_guard", str(os.getpid()), "--", *command]


class _Spawner:
    """Starts child processes from one long-lived thread.

    Linux sends the parent-death signal when the *thread* that forked a child exits; requests are
    served on short-lived threads, so a process they started directly would die with them.
    """

    def __init__(self) -> None:
        self._requests: queue.Queue[tuple[Callable[[], Any], queue.Queue[Any]]] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name="spawner", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            start, reply = self._requests.get()
            try:
                reply.put(start())
            except Exception as error:  # noqa: BLE001 - handed back to the caller, who raises it
                reply.put(error)

    def run(self, start: Callable[[], Any]) -> Any:
        reply: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._requests.put((start, reply))
        result = reply.get()
        if isinstance(result, Exception):
            raise result
        return result


_spawner_lock = threading.Lock()
_spawners: list[_Spawner] = []


def spawn(start: Callable[[], subprocess.Popen[Any]]) -> subprocess.Popen[Any]:
    """Run `start` (which creates a child process) on the spawner thread."""
    with _spawner_lock:
        if not _spawners:
            _spawners.append(_Spawner())
        spawner = _spawners[0]
    process: subprocess.Popen[Any] = spawner.run(start)
    return process


def host_environment() -> dict[str, str]:
    """What every local function inherits from the host (PATH, locale), nothing secret."""
    keep = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
    return {key: os.environ[key] for key in keep if key in os.environ}
