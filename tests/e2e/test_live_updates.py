"""Live updates over a real WebSocket on the local stack: tickets, who receives what, 410s, the cap.

Absence is proven by a condition, never by a sleep: a socket that should have received nothing
sends a ping and gets its pong with no frame before it, after the owner's socket (or a witness
of the same owner) received the update the other one must not have.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from shared.realtime import ticket_hash
from tests.support.cli import run
from tests.support.local_stack import RunningStack, assert_status_document, token_claims, unique

TIMEOUT = 60.0


def _ticket(stack: RunningStack, token: str) -> dict[str, Any]:
    answer = stack.call("POST", "/v1/realtime/tickets", token=token)
    assert answer.status == 201, answer.raw
    body: dict[str, Any] = answer.body
    assert set(body) == {"ticket", "url", "expiresAt"}
    return body


@contextlib.contextmanager
def _socket(url: str) -> Iterator[ClientConnection]:
    with connect(url, open_timeout=TIMEOUT, ping_interval=None, close_timeout=5) as websocket:
        yield websocket


def _refused(url: str) -> int:
    """The HTTP status with which the handshake was refused."""
    with pytest.raises(InvalidStatus) as refused, _socket(url):
        pass
    return refused.value.response.status_code


def _frames_until_pong(websocket: ClientConnection) -> list[dict[str, Any]]:
    """Every frame before the pong to our own ping: what the socket had been sent until now."""
    websocket.send(json.dumps({"action": "ping"}))
    frames: list[dict[str, Any]] = []
    while True:
        frame = json.loads(websocket.recv(timeout=TIMEOUT))
        if frame == {"type": "pong"}:
            return frames
        frames.append(frame)


def _updates_until(websocket: ClientConnection, job_id: str, status: str) -> list[dict[str, Any]]:
    """This job's pushed status documents, up to the first in `status`."""
    updates = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        frame = json.loads(websocket.recv(timeout=TIMEOUT))
        assert frame["type"] == "job", frame
        if frame["job"]["jobId"] != job_id:
            continue
        updates.append(frame["job"])
        if frame["job"]["status"] == status:
            return updates
    raise AssertionError(f"no {status} update for {job_id}: {updates}")


def _submit(stack: RunningStack, token: str, text: str) -> str:
    answer = stack.submit(token, {"operation": "summarize", "input": {"text": text}})
    assert answer.status == 202, answer.raw
    job_id: str = answer.body["jobId"]
    return job_id


def _connections_table(stack: RunningStack) -> str:
    (name,) = [n for logical_id, n in stack.state["tables"].items() if "ConnectionsTable" in logical_id]
    return str(name)


def _owner_partition(token: str) -> str:
    claims = token_claims(token)
    tenant = claims.get("custom:tenant") or f"user:{claims['sub']}"
    return f"OWNER#{tenant}#{claims['sub']}"


def _connection_ids(stack: RunningStack, token: str) -> list[str]:
    items = stack.aws("dynamodb").query(
        TableName=_connections_table(stack),
        KeyConditionExpression="pk = :owner",
        ExpressionAttributeValues={":owner": {"S": _owner_partition(token)}},
        ConsistentRead=True,
    )["Items"]
    return sorted(item["connectionId"]["S"] for item in items)


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.1)


def test_a_ticket_connects_once(stack: RunningStack) -> None:
    token = stack.token(unique("ticket-user"))
    url = _ticket(stack, token)["url"]
    base, _, _ = url.partition("?")

    with _socket(url) as websocket:
        assert _frames_until_pong(websocket) == []
        assert len(_connection_ids(stack, token)) == 1
        # The same ticket again, one never issued, one that is not even a ticket, none at all.
        assert _refused(url) == 403
        made_up = secrets.token_urlsafe(32)
        assert _refused(f"{base}?ticket={made_up}") == 403
        assert _refused(f"{base}?ticket=not-a-ticket") == 403
        assert _refused(base) == 401
        # An expired ticket: stored as the tickets function stores one, its minute long past.
        expired = secrets.token_urlsafe(32)
        claims = token_claims(token)
        stack.aws("dynamodb").put_item(
            TableName=_connections_table(stack),
            Item={
                "pk": {"S": f"TICKET#{ticket_hash(expired)}"},
                "sk": {"S": "TICKET"},
                "tenant": {"S": f"user:{claims['sub']}"},
                "sub": {"S": claims["sub"]},
                "expiresAt": {"N": str(int(time.time() * 1000) - 1000)},
                "ttl": {"N": str(int(time.time()) + 600)},
            },
        )
        assert _refused(f"{base}?ticket={urllib.parse.quote(expired)}") == 403
        assert len(_connection_ids(stack, token)) == 1  # none of them connected


def test_the_owner_receives_each_change_and_another_user_nothing(stack: RunningStack) -> None:
    alice, bob = stack.token(unique("alice")), stack.token(unique("bob"))
    with _socket(_ticket(stack, alice)["url"]) as alices, _socket(_ticket(stack, bob)["url"]) as bobs:
        # A first job warms the notifier, so each write of the next arrives in its own batch.
        warmup = _submit(stack, alice, unique("warm up the notifier"))
        _updates_until(alices, warmup, "Succeeded")

        job_id = _submit(stack, alice, unique("live updates") + " [[delay:2]]")
        updates = _updates_until(alices, job_id, "Succeeded")

        assert [u["status"] for u in updates] == ["Pending", "Running", "Succeeded"]
        revisions = [u["revision"] for u in updates]
        assert revisions == sorted(set(revisions)), revisions
        assert revisions[0] == 1
        for update in updates:
            assert_status_document(update, job_id)
        truth = stack.call("GET", f"/v1/jobs/{job_id}", token=alice).body
        assert truth["status"] == "Succeeded"
        assert truth["revision"] >= revisions[-1]
        # Alice's socket got the terminal update: anything meant for Bob was sent by now.
        assert _frames_until_pong(bobs) == []
        assert _frames_until_pong(alices) == []


def test_a_batch_jobs_wait_on_the_provider_is_pushed_then_its_end(stack: RunningStack) -> None:
    owner = stack.token(unique("batch-owner"))
    with _socket(_ticket(stack, owner)["url"]) as socket:
        answer = stack.submit(
            owner,
            {
                "operation": "summarize",
                "input": {"text": unique("a batch job")},
                "options": {"tier": "batch"},
            },
        )
        assert answer.status == 202, answer.raw
        job_id = answer.body["jobId"]

        updates = _updates_until(socket, job_id, "Succeeded")

    waits = [u for u in updates if u.get("waitingFor") == "provider_batch"]
    assert waits, updates
    assert all(u["status"] == "Running" for u in waits)
    assert updates[-1]["waitingFor"] is None
    assert updates[-1]["usage"]["tiers"] == ["batch"]


def test_a_client_that_connects_after_the_job_ended_gets_nothing_and_reads_the_truth(
    stack: RunningStack,
) -> None:
    token = stack.token(unique("late"))
    with _socket(_ticket(stack, token)["url"]) as witness:
        job_id = _submit(stack, token, unique("ended before the connect"))
        _updates_until(witness, job_id, "Succeeded")  # the notifier is done with this job
        with _socket(_ticket(stack, token)["url"]) as late:
            assert _frames_until_pong(late) == []
    truth = stack.call("GET", f"/v1/jobs/{job_id}", token=token).body
    assert truth["status"] == "Succeeded"
    assert_status_document(truth, job_id)


def test_a_closed_connection_is_forgotten(stack: RunningStack) -> None:
    token = stack.token(unique("closer"))
    with _socket(_ticket(stack, token)["url"]):
        assert len(_connection_ids(stack, token)) == 1
    _wait_for(lambda: _connection_ids(stack, token) == [], "$disconnect forgot the connection")


def test_a_connection_whose_disconnect_never_came_is_deleted_on_the_next_post(stack: RunningStack) -> None:
    token = stack.token(unique("ghost"))
    # $disconnect is best-effort in API Gateway: this connection is recorded but long gone (opened
    # two minutes ago: past its handshake, so a 410 from it means gone, not "still opening").
    now = int(time.time()) - 120
    stack.aws("dynamodb").put_item(
        TableName=_connections_table(stack),
        Item={
            "pk": {"S": _owner_partition(token)},
            "sk": {"S": "CONN#Z2hvc3QtY29ubmVjdGlvbg=="},
            "connectionId": {"S": "Z2hvc3QtY29ubmVjdGlvbg=="},
            "connectedAt": {"N": str(now * 1000)},
            "ttl": {"N": str(now + 7200)},
        },
    )
    with _socket(_ticket(stack, token)["url"]) as witness:
        assert "Z2hvc3QtY29ubmVjdGlvbg==" in _connection_ids(stack, token)
        job_id = _submit(stack, token, unique("posted to a ghost"))
        _updates_until(witness, job_id, "Pending")
        _wait_for(
            lambda: "Z2hvc3QtY29ubmVjdGlvbg==" not in _connection_ids(stack, token),
            "the 410 connection was deleted",
        )
        assert len(_connection_ids(stack, token)) == 1  # the witness stays


def test_an_eleventh_connection_closes_the_oldest(stack: RunningStack) -> None:
    token = stack.token(unique("many"))
    with contextlib.ExitStack() as sockets:
        opened = [sockets.enter_context(_socket(_ticket(stack, token)["url"])) for _ in range(10)]
        assert len(_connection_ids(stack, token)) == 10

        newest = sockets.enter_context(_socket(_ticket(stack, token)["url"]))

        # The oldest is closed by the API: its next read ends (it was sent nothing before).
        with pytest.raises(ConnectionClosed):
            opened[0].recv(timeout=TIMEOUT)
        assert len(_connection_ids(stack, token)) == 10
        for websocket in (opened[1], opened[-1], newest):
            assert _frames_until_pong(websocket) == []


def test_the_cli_follows_the_socket(
    stack: RunningStack, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    token = stack.token(unique("cli"))
    monkeypatch.setenv("OUTLAST_TOKEN", token)
    text = unique("the command line waits") + " [[delay:1]]"

    code, out, err = run("submit", "summarize", "--text", text, "--wait", "--api-url", stack.url)

    assert code == 0, err
    assert out.strip()
    assert "polling" not in err, err
    job_id = next(line.split()[1] for line in err.splitlines() if line.startswith("job ") and "(" in line)

    code, out, err = run("watch", job_id, "--json", "--api-url", stack.url)

    assert code == 0, err
    (document,) = [json.loads(line) for line in out.splitlines()]  # it ended already: the truth, once
    assert document["status"] == "Succeeded"
