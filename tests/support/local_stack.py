"""The local stack as a test fixture: `outlast local up` in a subprocess, driven over real HTTP."""

from __future__ import annotations

import base64
import json
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey
from moto.utilities.utils import load_resource

from outlast.local.access import issue_token, local_client
from outlast.local.fake_model.requests import messages_hash
from outlast.local.iam.denials import Denial, DenialLog
from outlast.local.process import free_port, interrupt, start_until_ready
from outlast.local.stack import read_state
from outlast.local.synth import STACK_TEMPLATE
from shared.contract import Operation
from shared.prompts import template_for
from tests.support.answers import STATUS_DOCUMENT_FIELDS

PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_SECONDS = 300  # a first synth plus cold processes on a busy two-core machine


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
    cdk_out: Path | None = None

    @property
    def url(self) -> str:
        return str(self.state["apiUrl"])

    @property
    def console_url(self) -> str:
        """The web console's URL (its own origin), as `outlast local up` printed it."""
        url = self.state.get("consoleUrl")
        assert url, "the local stack serves no console (is it built? `npm ci`)"
        return str(url)

    @property
    def console_origin(self) -> str:
        return self.console_url.rstrip("/")

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
                return Answer(
                    response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
                )
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

    def wait_status(
        self, job_id: str, token: str, status: str, timeout_seconds: float = 60
    ) -> dict[str, Any]:
        """Poll until the job shows `status`."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            document: dict[str, Any] = self.call("GET", f"/v1/jobs/{job_id}", token=token).body
            if document["status"] == status:
                return document
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} never reached {status}; last {document['status']}")
            time.sleep(0.2)

    def submit(
        self, token: str, body: Any, key: str | None = None, headers: Mapping[str, str] | None = None
    ) -> Answer:
        """POST /v1/jobs with the given Idempotency-Key, or a fresh one."""
        return self.call(
            "POST",
            "/v1/jobs",
            token=token,
            body=body,
            headers={"Idempotency-Key": key or new_key(), **(headers or {})},
        )

    def aws(self, service: str) -> Any:
        """A boto3 client for this stack's moto, with its dummy credentials."""
        return local_client(service, self.state)

    def sign_in(self, user: str, client_id: str | None = None) -> dict[str, str]:
        """All tokens of an existing local user (IdToken, AccessToken...) from a fresh admin sign-in."""
        cognito = self.aws("cognito-idp")
        password = "Aa1!" + secrets.token_urlsafe(16)
        pool = self.state["userPoolId"]
        cognito.admin_set_user_password(UserPoolId=pool, Username=user, Password=password, Permanent=True)
        result = cognito.admin_initiate_auth(
            UserPoolId=pool,
            ClientId=client_id or self.state["userPoolClientId"],
            AuthFlow="ADMIN_USER_PASSWORD_AUTH",
            AuthParameters={"USERNAME": user, "PASSWORD": password},
        )
        return {str(k): str(v) for k, v in result["AuthenticationResult"].items()}

    def model_calls(
        self, request_hash: str, at_least: int = 0, timeout_seconds: float = 5
    ) -> list[dict[str, Any]]:
        """The local model server's finished calls for one request (its call log is written just
        after the answer, so wait briefly for `at_least` of them)."""
        base = str(self.state["modelUrl"]).removesuffix("/v1")
        deadline = time.monotonic() + timeout_seconds
        while True:
            with urllib.request.urlopen(base + "/_calls", timeout=10) as response:  # noqa: S310 - loopback
                calls = [c for c in json.loads(response.read()) if c["requestHash"] == request_hash]
            if len(calls) >= at_least or time.monotonic() > deadline:
                return calls
            time.sleep(0.1)

    def denials(self) -> list[Denial]:
        """Every call local mode denied so far (a function's role did not allow it)."""
        return DenialLog(Path(self.state["iam"]["denials"])).read()

    def template(self) -> dict[str, Any]:
        """The synthesized CloudFormation template this stack was built from."""
        assert self.cdk_out is not None, "started without a cloud assembly directory"
        template: dict[str, Any] = json.loads((self.cdk_out / STACK_TEMPLATE).read_text())
        return template


def start_stack(
    cdk_out: Path, context: Mapping[str, str] | None = None, extra_args: list[str] | None = None
) -> RunningStack:
    """Start `outlast local up` on a free port and wait for its `ready:` line."""
    port = free_port()
    arguments = [
        sys.executable,
        "-m",
        "outlast.cli",
        "local",
        "up",
        "--port",
        str(port),
        "--console-port",
        str(free_port()),
        "--cdk-out",
        str(cdk_out),
    ]
    for key, value in (context or {}).items():
        arguments += ["--context", f"{key}={value}"]
    arguments += extra_args or []
    process = start_until_ready(
        arguments, cwd=PROJECT_ROOT, stderr=None, timeout_seconds=START_TIMEOUT_SECONDS
    )
    return RunningStack(process=process, port=port, state=read_state(port), cdk_out=cdk_out)


def stop_stack(stack: RunningStack, timeout_seconds: float = 30) -> None:
    """Ctrl-C, as a user would; the stack must stop everything it started (killed after the timeout)."""
    interrupt(stack.process, timeout_seconds)


# --- helpers for end-to-end assertions ---------------------------------------------------------

JOB_STATUSES = frozenset({"Pending", "Running", "Succeeded", "Failed", "CancellationRequested", "Canceled"})
TERMINAL_STATUSES = frozenset({"Succeeded", "Failed", "Canceled"})
JOB_ERROR_CODES = frozenset(
    {
        "invalid_input",
        "context_length_exceeded",
        "content_policy",
        "provider_auth",
        "retries_exhausted",
        "input_missing",
        "worker_crashed",
        "invalid_output",
        "output_truncated",
    }
)
JOB_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
# What must never reach a caller: exception text, internals, and the local model's error payloads.
LEAKS = (
    "Traceback",
    "Exception",
    "botocore",
    "ClientError",
    "pydantic",
    "leaseToken",
    "lease_token",
    "fingerprint",
    "injected",
    "[[fault",
    "Rate limit reached",
    "maximum context length",
    "safety system",
    "rate_limit_exceeded",
    "content_policy_violation",
)


def new_key() -> str:
    """A fresh Idempotency-Key."""
    return f"e2e-{uuid.uuid4()}"


def unique(prefix: str) -> str:
    """A name no other test uses (users and texts; tests share one stack)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def request_hash(operation: str, text: str, labels: tuple[str, ...] | None = None) -> str:
    """The local model server's key for the call the worker makes for this input."""
    return messages_hash(template_for(Operation(operation)).render(text, labels))


def output_events(stack: RunningStack, token: str, job_id: str) -> dict[str, Any]:
    """Every event of the job, read in pages until complete."""
    events: list[dict[str, Any]] = []
    after = "0.0"
    while True:
        answer = stack.call("GET", f"/v1/jobs/{job_id}/output?after={after}", token=token)
        assert answer.status == 200, answer.raw
        events += answer.body["events"]
        if answer.body["complete"]:
            return {**answer.body, "events": events}
        after = answer.body["nextCursor"]


def joined_attempt(events: list[dict[str, Any]], attempt: int) -> str:
    """The text of one output attempt's events, checked gapless from seq 1."""
    mine = sorted((e for e in events if e["attempt"] == attempt), key=lambda e: e["seq"])
    assert [e["seq"] for e in mine] == list(range(1, len(mine) + 1)), "seq must be gapless from 1"
    return "".join(e["text"] for e in mine)


def token_claims(token: str) -> dict[str, Any]:
    """A JWT's claims, unverified (to read them, or to copy them into a forged token)."""
    payload = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return claims


def forge_token(claims: Mapping[str, Any], header: Mapping[str, str] | None = None) -> str:
    """A token signed with moto's bundled Cognito key (kid "dummy"), so that the signature is valid
    and only the claims (or the header) decide: moto cannot issue an expired token, this can."""
    key = RSAKey.import_key(load_resource("cognitoidp/resources/jwks-private.json"))
    chosen = dict(header) if header is not None else {"alg": "RS256", "kid": "dummy", "typ": "JWT"}
    return str(jwt.encode(chosen, dict(claims), key))


def port_of(url: str) -> int:
    """The port of an http://host:port... URL."""
    port = urllib.parse.urlsplit(url).port
    assert port is not None, url
    return port


def accepts_connections(port: int) -> bool:
    """True when something listens on the loopback port."""
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _process_start(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of a live, non-zombie process; None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
    state, parent, start = fields[0], int(fields[1]), fields[19]
    return None if state in {"Z", "X"} else (parent, start)


def descendants(pid: int) -> dict[int, str]:
    """Every live process below `pid` (Linux /proc), with its start time to tell a reused pid apart."""
    parents: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (found := _process_start(int(entry.name))) is not None:
            parents.setdefault(found[0], []).append((int(entry.name), found[1]))
    below: dict[int, str] = {}
    pending = [pid]
    while pending:
        for child, start in parents.get(pending.pop(), []):
            below[child] = start
            pending.append(child)
    return below


def function_processes(stack: RunningStack, handler: str) -> list[int]:
    """The live function processes of a stack that run this handler (awslambdaric children)."""
    found = []
    for pid in descendants(stack.process.pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if handler.encode() in command:
            found.append(pid)
    return found


def still_running(processes: Mapping[int, str]) -> list[int]:
    """The processes of a `descendants` snapshot that are alive now (same pid, same start time)."""
    return [pid for pid, start in processes.items() if (found := _process_start(pid)) and found[1] == start]


def assert_unchanged(later: dict[str, Any], earlier: dict[str, Any]) -> None:
    """Two status documents of a job with no write of it in between: equal, except that its run's
    budget reservation may have been settled meanwhile (the notifier's, after the terminal write),
    which only ever turns `reservedTokens` to null."""
    assert later.get("reservedTokens") in (None, earlier.get("reservedTokens")), (later, earlier)
    assert _without_reservation(later) == _without_reservation(earlier)


def _without_reservation(document: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in document.items() if name != "reservedTokens"}


def assert_problem(answer: Answer, status: int, code: str) -> dict[str, Any]:
    """A function's RFC 9457 answer: problem+json, the stable code, the API Gateway request id."""
    assert answer.status == status, f"expected {status} {code}, got {answer.status}: {answer.raw[:500]!r}"
    assert answer.content_type == "application/problem+json", answer.headers
    body: dict[str, Any] = answer.body
    assert body["type"] == f"urn:outlast:problem:{code}", body
    assert body["code"] == code, body
    assert body["status"] == status, body
    assert body["title"], body
    assert body["detail"], body
    assert body["correlationId"] == answer.headers.get("apigw-requestid"), (body, answer.headers)
    text = answer.raw.decode()
    assert not [leak for leak in LEAKS if leak in text], text
    return body


def assert_api_gateway_401(answer: Answer) -> None:
    """The authorizer's own refusal, as API Gateway sends it: not problem+json."""
    assert answer.status == 401, (answer.status, answer.raw[:500])
    assert answer.content_type == "application/json", answer.headers
    assert answer.body == {"message": "Unauthorized"}
    assert answer.headers.get("apigw-requestid")


def assert_retry_after(answer: Answer) -> int:
    """Retry-After is delta-seconds, an integer >= 1, never an HTTP date."""
    value = answer.headers.get("retry-after")
    assert value is not None, "no Retry-After"
    assert value.isdigit(), f"Retry-After {value!r}"
    assert int(value) >= 1, value
    return int(value)


def assert_status_document(document: dict[str, Any], job_id: str | None = None) -> None:
    """The status document of DESIGN.md, field by field, with nothing internal in it."""
    assert set(document) == STATUS_DOCUMENT_FIELDS, sorted(document)
    assert JOB_ID.match(document["jobId"]), document["jobId"]
    if job_id is not None:
        assert document["jobId"] == job_id
    assert document["status"] in JOB_STATUSES, document
    assert document["operation"] in {"summarize", "analyze", "classify", "extract"}, document
    for name in ("createdAt", "updatedAt", "expiresAt"):
        assert TIMESTAMP.match(document[name]), (name, document[name])
    assert document["createdAt"] <= document["updatedAt"] < document["expiresAt"], document
    assert isinstance(document["attempts"], int), document
    assert document["attempts"] >= 0, document
    assert document["cancelRequestedAt"] is None or TIMESTAMP.match(document["cancelRequestedAt"]), document
    expected_url = f"/v1/jobs/{document['jobId']}/result" if document["status"] == "Succeeded" else None
    assert document["resultUrl"] == expected_url, document
    if document["status"] == "Failed":
        assert set(document["error"]) == {"code", "message"}, document
        assert document["error"]["code"] in JOB_ERROR_CODES, document
    else:
        assert document["error"] is None, document
    usage = document["usage"]
    assert usage is None or (
        set(usage) == {"inputTokens", "outputTokens", "estimated", "cachedInputTokens", "tiers"}
        and all(
            isinstance(usage[k], int) and usage[k] >= 0
            for k in ("inputTokens", "outputTokens", "cachedInputTokens")
        )
        and usage["cachedInputTokens"] <= usage["inputTokens"]
        and isinstance(usage["estimated"], bool)
        and set(usage["tiers"]) <= {"standard", "flex"}
    ), usage
    text = json.dumps(document)
    assert not [leak for leak in LEAKS if leak in text], text
