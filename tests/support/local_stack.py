"""The local stack as a test fixture: `outlast local up` in a subprocess, driven over real HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from outlast.commands.local import issue_token
from outlast.local.stack import read_state

PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 300  # a first synth plus cold processes on a busy two-core machine


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Answer:
    """One HTTP answer: status, headers (lowercase names) and the parsed JSON body (if any)."""

    status: int
    headers: dict[str, str]
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw) if self.raw else None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


@dataclass
class RunningStack:
    """A started `outlast local up`, its state file and a way to call it."""

    process: subprocess.Popen[str]
    port: int
    state: dict[str, Any]
    tokens: dict[tuple[str, str | None], str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return str(self.state["apiUrl"])

    def token(self, user: str, tenant: str | None = None) -> str:
        """An ID token for a local user (cached per user and tenant)."""
        key = (user, tenant)
        if key not in self.tokens:
            self.tokens[key] = issue_token(self.state, user, tenant)
        return self.tokens[key]

    def call(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        body: Any = None,
        raw_body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """One request to the local HTTP API."""
        data = raw_body if raw_body is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(self.url + path, data=data, method=method)  # noqa: S310 - loopback
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
                return Answer(response.status, {k.lower(): v for k, v in response.headers.items()}, response.read())
        except urllib.error.HTTPError as error:
            return Answer(error.code, {k.lower(): v for k, v in error.headers.items()}, error.read())

    def wait_terminal(self, job_id: str, token: str, timeout_seconds: float = 90) -> dict[str, Any]:
        """Poll the job (honouring nothing but a short pause) until it is terminal."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            document: dict[str, Any] = self.call("GET", f"/v1/jobs/{job_id}", token=token).body
            if document["status"] in {"Succeeded", "Failed", "Canceled"}:
                return document
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still {document['status']} after {timeout_seconds} s")
            time.sleep(0.3)

    def wait_status(self, job_id: str, token: str, status: str, timeout_seconds: float = 60) -> dict[str, Any]:
        """Poll until the job shows `status`."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            document: dict[str, Any] = self.call("GET", f"/v1/jobs/{job_id}", token=token).body
            if document["status"] == status:
                return document
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} never reached {status}; last {document['status']}")
            time.sleep(0.2)


def start_stack(
    cdk_out: Path, context: Mapping[str, str] | None = None, extra_args: list[str] | None = None
) -> RunningStack:
    """Start `outlast local up` on a free port and wait for its `ready:` line."""
    port = free_port()
    arguments = [sys.executable, "-m", "outlast.cli", "local", "up", "--port", str(port), "--cdk-out", str(cdk_out)]
    for key, value in (context or {}).items():
        arguments += ["--context", f"{key}={value}"]
    arguments += extra_args or []
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        arguments,
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    assert process.stdout is not None
    while True:
        line = process.stdout.readline()
        if line.startswith("ready: "):
            break
        if not line and process.poll() is not None:
            raise RuntimeError(f"outlast local up exited with {process.returncode}")
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("outlast local up did not become ready in time")
    return RunningStack(process=process, port=port, state=read_state(port))


def stop_stack(stack: RunningStack) -> None:
    """Ctrl-C, as a user would; the stack must stop everything it started."""
    stack.process.send_signal(signal.SIGINT)
    try:
        stack.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        stack.process.kill()
        stack.process.wait(timeout=10)
