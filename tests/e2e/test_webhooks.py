"""Webhooks on the local stack, to a receiver on 127.0.0.1 run by the test (DESIGN.md, "Webhooks").

Endpoints are registered with the operator CLI (`outlast ops webhooks add --local`), jobs are
submitted over HTTP, and what arrives is read off the receiver. Signatures are checked here
with the Standard Webhooks algorithm written out from the spec (HMAC-SHA256 over
`{id}.{timestamp}.{body}` under the base64-decoded secret, `v1,` + base64), not with the
project's own verifier. The session stack runs the retry schedule at `webhookRetryScale`
0.0001 (1 s ... 4 s), so seven attempts take seconds. Every test has tenants of its own: the
stack is shared, and other tests' jobs belong to tenants without endpoints.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from infra.names import WEBHOOKS, FunctionName
from outlast.local.process import free_port
from shared import resources as r
from tests.support.cli import run
from tests.support.local_stack import RunningStack, assert_status_document, token_claims, unique

TOLERANCE_SECONDS = 300
WAIT_SECONDS = 60


@dataclass(frozen=True)
class Received:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST and answers from a script per path."""

    port: int = 0
    scripts: dict[str, list[int]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.received.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    script = receiver.scripts.get(self.path, [])
                    status = script.pop(0) if len(script) > 1 else (script[0] if script else 200)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def at(self, path: str) -> list[Received]:
        with self.lock:
            return [request for request in self.received if request.path == path]

    def wait_for(self, path: str, count: int) -> list[Received]:
        found: list[Received] = wait_until(
            lambda: (requests := self.at(path)) and len(requests) >= count and requests, f"{count} at {path}"
        )
        return found


def wait_until(check: Callable[[], Any], what: str, timeout: float = WAIT_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.2)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver().start()
    yield started
    started.stop()


def standard_webhooks_signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    """The spec's symmetric signature, computed here: what every entry of webhook-signature must be."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def assert_signed(request: Received, *secrets: str) -> None:
    """Each secret's signature is one of the header's entries, and the timestamp is fresh."""
    timestamp = request.headers["webhook-timestamp"]
    assert timestamp.isdigit()
    assert abs(time.time() - int(timestamp)) < TOLERANCE_SECONDS
    entries = request.headers["webhook-signature"].split(" ")
    assert len(entries) == len(secrets), entries
    for secret in secrets:
        expected = standard_webhooks_signature(secret, request.headers["webhook-id"], timestamp, request.body)
        assert any(hmac.compare_digest(expected, entry) for entry in entries)


class Operator:
    """`outlast ops webhooks ... --local --port P`, in-process, as an operator would type it."""

    def __init__(self, stack: RunningStack, capsys: pytest.CaptureFixture[str]) -> None:
        self._target = ["--local", "--port", str(stack.port)]
        self._capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        command, *rest = argv
        return run("ops", "webhooks", command, *self._target, *rest)

    def json(self, *argv: str) -> Any:
        code, out, err = self(*argv, "--json")
        assert code == 0, (code, out, err)
        return json.loads(out)

    def add(self, tenant: str, url: str, *events: str) -> tuple[str, str]:
        document = self.json("add", "--tenant", tenant, "--url", url, *(f"--event={e}" for e in events))
        return document["endpointId"], document["secret"]

    def delivery(self, endpoint_id: str) -> dict[str, Any] | None:
        found = self.json("deliveries", endpoint_id)["deliveries"]
        return found[0] if found else None

    def endpoint(self, endpoint_id: str) -> dict[str, Any]:
        (found,) = [e for e in self.json("list")["endpoints"] if e["endpointId"] == endpoint_id]
        return dict(found)


@pytest.fixture
def operator(stack: RunningStack, capsys: pytest.CaptureFixture[str]) -> Operator:
    return Operator(stack, capsys)


def _submit(stack: RunningStack, tenant: str) -> tuple[str, str]:
    token = stack.token(unique("hook-user"), tenant)
    answer = stack.submit(token, {"operation": "summarize", "input": {"text": unique("webhook text")}})
    assert answer.status == 202, answer.raw
    job_id = answer.body["jobId"]
    assert stack.wait_terminal(job_id, token)["status"] == "Succeeded"
    return job_id, token


def test_the_egress_flag_is_off_in_the_template_and_only_local_mode_turns_it_on(stack: RunningStack) -> None:
    sender = [
        resource
        for logical_id, resource in stack.template()["Resources"].items()
        if logical_id.startswith(WEBHOOKS + FunctionName.WEBHOOK_SENDER.construct_id)
        and resource["Type"] == "AWS::Lambda::Function"
    ]
    (function,) = sender
    assert function["Properties"]["Environment"]["Variables"][r.ENV_WEBHOOK_LOCAL_EGRESS] == "false"
    # The deliveries below reach http://127.0.0.1: the local stack overrode it for itself.


def test_a_succeeded_job_arrives_once_signed_and_no_other_tenant_hears_it(
    stack: RunningStack, operator: Operator, receiver: Receiver
) -> None:
    mine, theirs = unique("hooks-a"), unique("hooks-b")
    endpoint_id, secret = operator.add(mine, receiver.url("/mine"))
    operator.add(theirs, receiver.url("/theirs"))

    job_id, token = _submit(stack, mine)

    (request,) = receiver.wait_for("/mine", 1)
    assert request.headers["webhook-id"] == f"{job_id}.0.job.succeeded"
    assert request.headers["content-type"] == "application/json"
    assert_signed(request, secret)
    body = json.loads(request.body)
    assert body["type"] == "job.succeeded"
    owner = body["data"].pop("owner")
    assert owner == {"tenant": mine, "sub": token_claims(token)["sub"]}
    document = stack.call("GET", f"/v1/jobs/{job_id}", token=token).body
    assert body["data"] == document
    assert body["timestamp"] == document["updatedAt"]
    assert_status_document(body["data"], job_id)
    # A later job of the same tenant arrives too: by then a duplicate of the first would have.
    second_job, _ = _submit(stack, mine)
    first, second = receiver.wait_for("/mine", 2)
    assert [first.headers["webhook-id"], second.headers["webhook-id"]] == [
        f"{job_id}.0.job.succeeded",
        f"{second_job}.0.job.succeeded",
    ]
    assert receiver.at("/theirs") == []
    delivery = wait_until(
        lambda: (d := operator.delivery(endpoint_id)) and d["webhookId"].startswith(second_job) and d,
        "the second delivery recorded",
    )
    assert delivery["state"] == "delivered"
    assert [(a["status"], a["outcome"]) for a in delivery["attempts"]] == [(200, "delivered")]


def test_a_batch_job_arrives_as_any_job_does(
    stack: RunningStack, operator: Operator, receiver: Receiver
) -> None:
    # Given a tenant with an endpoint, and a job of the batch tier (answered by the local Batch API)
    tenant = unique("hooks-batch")
    _, secret = operator.add(tenant, receiver.url("/batch"))
    token = stack.token(unique("hook-user"), tenant)
    body = {
        "operation": "summarize",
        "input": {"text": unique("batch webhook text")},
        "options": {"tier": "batch"},
    }
    answer = stack.submit(token, body)
    assert answer.status == 202, answer.raw
    job_id = answer.body["jobId"]

    # When it ends
    assert stack.wait_terminal(job_id, token)["status"] == "Succeeded"

    # Then its webhook arrives once, signed, as any job's does
    (request,) = receiver.wait_for("/batch", 1)
    assert request.headers["webhook-id"] == f"{job_id}.0.job.succeeded"
    assert_signed(request, secret)
    delivered = json.loads(request.body)["data"]
    assert delivered["usage"]["tiers"] == ["batch"]
    assert delivered["waitingFor"] is None


def test_a_receiver_that_answers_500_twice_gets_the_third_attempt_with_the_same_id(
    stack: RunningStack, operator: Operator, receiver: Receiver
) -> None:
    tenant = unique("hooks-flaky")
    receiver.scripts["/flaky"] = [500, 500, 204]
    endpoint_id, secret = operator.add(tenant, receiver.url("/flaky"))

    job_id, _ = _submit(stack, tenant)

    attempts = receiver.wait_for("/flaky", 3)
    assert {a.headers["webhook-id"] for a in attempts} == {f"{job_id}.0.job.succeeded"}
    assert len({a.body for a in attempts}) == 1
    for attempt in attempts:
        assert_signed(attempt, secret)
    delivery = wait_until(
        lambda: (d := operator.delivery(endpoint_id)) and d["state"] == "delivered" and d, "delivered"
    )
    assert [a["status"] for a in delivery["attempts"]] == [500, 500, 204]
    assert [a["number"] for a in delivery["attempts"]] == [1, 2, 3]


def test_a_410_disables_the_endpoint(stack: RunningStack, operator: Operator, receiver: Receiver) -> None:
    tenant = unique("hooks-gone")
    receiver.scripts["/gone"] = [410]
    gone_id, _ = operator.add(tenant, receiver.url("/gone"))
    operator.add(tenant, receiver.url("/witness"))

    _submit(stack, tenant)
    receiver.wait_for("/gone", 1)
    endpoint = wait_until(lambda: (e := operator.endpoint(gone_id)) and not e["enabled"] and e, "disabled")
    assert "410" in endpoint["disabledReason"]

    second_job, _ = _submit(stack, tenant)
    witnessed = receiver.wait_for("/witness", 2)
    assert witnessed[-1].headers["webhook-id"].startswith(second_job)
    assert len(receiver.at("/gone")) == 1
    assert operator.delivery(gone_id)["state"] == "gone"  # type: ignore[index]


def test_an_endpoint_that_never_answers_ends_on_the_dlq_and_redrive_delivers_it_once_back(
    stack: RunningStack, operator: Operator
) -> None:
    tenant = unique("hooks-down")
    port = free_port()  # nothing listens there yet: every attempt is refused
    endpoint_id, secret = operator.add(tenant, f"http://127.0.0.1:{port}/down")

    job_id, _ = _submit(stack, tenant)
    delivery = wait_until(
        lambda: (d := operator.delivery(endpoint_id)) and d["state"] == "dead" and d, "dead-lettered", 120
    )
    assert [a["failure"] for a in delivery["attempts"]] == ["connection"] * 7

    code, out, _ = operator("redrive", "--endpoint", endpoint_id, "--dry-run")
    assert code == 0, out
    assert f"{job_id}.0.job.succeeded" in out
    assert "redrive: back on the webhooks queue" in out

    back = Receiver(port=port).start()
    try:
        code, out, _ = operator("redrive", "--endpoint", endpoint_id)
        assert code == 0, out
        (request,) = back.wait_for("/down", 1)
        assert request.headers["webhook-id"] == f"{job_id}.0.job.succeeded"
        assert_signed(request, secret)
        wait_until(lambda: (d := operator.delivery(endpoint_id)) and d["state"] == "delivered", "delivered")
        code, out, _ = operator("redrive", "--endpoint", endpoint_id, "--dry-run")
        assert "0 selected" in out  # the DLQ holds nothing of it any more
    finally:
        back.stop()


def test_during_a_rotation_both_secrets_sign_and_each_verifies(
    stack: RunningStack, operator: Operator, receiver: Receiver
) -> None:
    tenant = unique("hooks-rotate")
    endpoint_id, old = operator.add(tenant, receiver.url("/rotating"))
    rotated = operator.json("rotate", endpoint_id)
    new = rotated["secret"]
    assert new != old
    code, _, err = operator("rotate", endpoint_id)  # a second rotation inside the overlap
    assert code == 1
    assert "--force" in err

    _submit(stack, tenant)

    (request,) = receiver.wait_for("/rotating", 1)
    assert_signed(request, new, old)
    first, second = request.headers["webhook-signature"].split(" ")
    assert first == standard_webhooks_signature(
        new, request.headers["webhook-id"], request.headers["webhook-timestamp"], request.body
    )
    assert second == standard_webhooks_signature(
        old, request.headers["webhook-id"], request.headers["webhook-timestamp"], request.body
    )


def test_add_refuses_what_the_egress_guard_refuses(operator: Operator) -> None:
    code, out, err = operator(
        "add", "--tenant", unique("hooks-refused"), "--url", "http://169.254.169.254/latest"
    )

    assert code == 2
    assert "refused (address)" in err
    assert out == ""
