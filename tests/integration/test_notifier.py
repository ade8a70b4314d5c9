"""The notifier's handler on moto, posting through the local @connections API to real WebSocket clients.

Stream batches are built from job items as the repository writes them (NEW_IMAGE), with the
duplicates and reordering a stream retry can bring; what each client receives is read off its
own socket.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from functions.notifier.handler import lambda_handler as notifier_handler
from outlast.local.websocket_front import (
    ConnectionRegistry,
    ManagementApi,
    WebSocketConfig,
    WebSocketFront,
    WebSocketRoute,
)
from shared import resources as r
from shared.adapters.dynamodb_connections import DynamoConnectionStore
from shared.job import Caller, JobRecord
from shared.lifecycle import JobStatus
from shared.realtime import CONNECT_GRACE, Connection
from tests.support import jobs
from tests.support.aws import REGION, create_connections_table, create_webhooks_queues, create_webhooks_table
from tests.support.events import job_stream_record as _record
from tests.support.lambda_context import FakeLambdaContext

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:No application metrics")]

ALICE = Caller(tenant="user:alice", sub="alice")
BOB = Caller(tenant="user:bob", sub="bob")


@dataclass
class Sockets:
    registry: ConnectionRegistry
    front: WebSocketFront
    management: ManagementApi
    store: DynamoConnectionStore
    clients: contextlib.ExitStack

    def open(self, owner: Caller, connected_at: datetime | None = None) -> tuple[str, ClientConnection]:
        """A real client on the local front, recorded under `owner` as $connect would."""
        before = set(self.registry.ids())
        client = self.clients.enter_context(connect(self.front.url, open_timeout=10, ping_interval=None))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            new = set(self.registry.ids()) - before
            if new:
                (connection_id,) = new
                self.store.add_connection(
                    Connection(
                        connection_id=connection_id,
                        owner=owner,
                        connected_at=connected_at or jobs.now_millis(),
                    )
                )
                return connection_id, client
            time.sleep(0.01)
        raise AssertionError("the front never registered the connection")


@pytest.fixture
def sockets(resources: TestResources, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sockets]:
    assert resources
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    table = create_connections_table(endpoint)
    registry = ConnectionRegistry()
    front = WebSocketFront(registry, log=lambda _line: None).start(
        WebSocketConfig(api_id="local", stage="live", routes={})
    )
    management = ManagementApi(registry, log=lambda _line: None).start()
    monkeypatch.setenv(r.ENV_CONNECTIONS_TABLE, table)
    monkeypatch.setenv(r.ENV_CONNECTIONS_ENDPOINT, management.url)
    # No endpoint is registered: these tests are about the pushes (test_webhook_notifier: webhooks).
    monkeypatch.setenv(r.ENV_WEBHOOKS_TABLE, create_webhooks_table(endpoint))
    monkeypatch.setenv(r.ENV_WEBHOOKS_QUEUE_URL, create_webhooks_queues(endpoint)[0])
    store = DynamoConnectionStore(boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION), table)
    with contextlib.ExitStack() as clients:
        yield Sockets(registry, front, management, store, clients)
    front.stop()
    management.stop()


def _at(job: JobRecord, revision: int, status: JobStatus) -> JobRecord:
    return job.model_copy(update={"revision": revision, "status": status})


def _notify(records: list[dict[str, Any]]) -> dict[str, Any]:
    response: dict[str, Any] = notifier_handler({"Records": records}, FakeLambdaContext())
    return response


def _received_until_pong(client: ClientConnection) -> list[dict[str, Any]]:
    """Every frame before the answer to a ping of our own: proof of what was (not) sent before it."""
    # The bare front has no $default route: its answer to any message is API Gateway's Forbidden.
    client.send(json.dumps({"action": "ping"}))
    frames: list[dict[str, Any]] = []
    while True:
        frame = json.loads(client.recv(timeout=10))
        if frame.get("message") == "Forbidden":
            return frames
        frames.append(frame)


def test_duplicates_and_reordering_never_push_an_older_revision_after_a_newer_one(sockets: Sockets) -> None:
    job = jobs.new_job(ALICE)
    pending, running = _at(job, 1, JobStatus.PENDING), _at(job, 2, JobStatus.RUNNING)
    done = _at(job, 5, JobStatus.SUCCEEDED)
    _, client = sockets.open(ALICE)
    # A retried shard replays records: the terminal write arrives between two older ones, twice.
    batch = [
        _record(pending, 1, "submit", "INSERT"),
        _record(done, 2, "terminal"),
        _record(running, 3, "claim"),
        _record(done, 4, "terminal"),
        _record(pending, 5, "submit", "INSERT"),
    ]

    assert _notify(batch) == {"batchItemFailures": []}

    frames = _received_until_pong(client)
    assert [(f["job"]["revision"], f["job"]["status"]) for f in frames] == [(5, "Succeeded")]
    assert frames[0]["type"] == "job"
    assert frames[0]["job"] == done.status_document().to_wire()


def test_the_owner_alone_receives_and_later_batches_bring_newer_revisions(sockets: Sockets) -> None:
    job = jobs.new_job(ALICE)
    _, alice = sockets.open(ALICE)
    _, bob = sockets.open(BOB)

    _notify([_record(_at(job, 1, JobStatus.PENDING), 1, "submit", "INSERT")])
    _notify(
        [
            _record(_at(job, 2, JobStatus.RUNNING), 2, "claim"),
            _record(_at(job, 3, JobStatus.RUNNING), 3, "heartbeat"),
        ]
    )
    _notify([_record(_at(job, 4, JobStatus.SUCCEEDED), 4, "terminal")])

    assert [f["job"]["revision"] for f in _received_until_pong(alice)] == [1, 2, 4]
    assert _received_until_pong(bob) == []


def test_a_failing_post_does_not_fail_the_batch(sockets: Sockets) -> None:
    class Broken:
        def send(self, _data: str) -> None:
            raise RuntimeError("the connection's host is failing")

    job = jobs.new_job(ALICE)
    _, healthy = sockets.open(ALICE)
    broken_id, broken = sockets.open(ALICE)
    live = sockets.registry.get(broken_id)
    assert live is not None
    live.connection = Broken()  # type: ignore[assignment] # fault injection: its posts answer 500

    response = _notify([_record(_at(job, 1, JobStatus.PENDING), 1, "submit", "INSERT")])

    assert response == {"batchItemFailures": []}
    assert [f["job"]["revision"] for f in _received_until_pong(healthy)] == [1]
    # A failure is not a 410: the connection is still recorded.
    assert broken_id in {c.connection_id for c in sockets.store.connections_of(ALICE)}
    assert broken


def test_a_connection_that_answers_410_is_deleted(sockets: Sockets) -> None:
    job = jobs.new_job(ALICE)
    # Past its handshake's window: a 410 then means gone, not "still opening".
    gone_id, gone = sockets.open(ALICE, connected_at=jobs.now_millis() - CONNECT_GRACE)
    gone.close()
    deadline = time.monotonic() + 10
    while sockets.registry.get(gone_id) is not None and time.monotonic() < deadline:
        time.sleep(0.01)  # the front drops it from its registry once the close completes
    _, alive = sockets.open(ALICE)

    assert _notify([_record(_at(job, 1, JobStatus.PENDING), 1, "submit", "INSERT")]) == {
        "batchItemFailures": []
    }

    assert gone_id not in {c.connection_id for c in sockets.store.connections_of(ALICE)}
    assert [f["job"]["revision"] for f in _received_until_pong(alive)] == [1]
    with pytest.raises(ConnectionClosed):
        gone.recv(timeout=1)


def test_a_push_during_the_handshake_does_not_lose_the_connection_for_later_updates(
    sockets: Sockets, resources: TestResources
) -> None:
    """Issue 22: `submit --wait` waited 30 s for a job that ended in 3. $connect records the
    connection before API Gateway completes the handshake, and until it does a post to it answers
    410 (AWS and the local front alike); a notifier batch that lands in that window must not
    forget the connection, or every later update of its life (the terminal one too) reaches no one."""
    assert resources
    job = jobs.new_job(ALICE)

    def connect_route(event: dict[str, Any]) -> dict[str, Any]:
        # What functions/ws_connections does, then a notifier batch before the handshake ends.
        context = event["requestContext"]
        sockets.store.add_connection(
            Connection(connection_id=context["connectionId"], owner=ALICE, connected_at=jobs.now_millis())
        )
        assert _notify([_record(_at(job, 1, JobStatus.PENDING), 1, "submit", "INSERT")]) == {
            "batchItemFailures": []
        }
        return {"statusCode": 200}

    front = WebSocketFront(sockets.registry, log=lambda _line: None).start(
        WebSocketConfig(
            api_id="local", stage="live", routes={"$connect": WebSocketRoute("$connect", connect_route)}
        )
    )
    try:
        with connect(front.url, open_timeout=10, ping_interval=None) as client:
            _notify([_record(_at(job, 3, JobStatus.SUCCEEDED), 2, "terminal")])

            frames = [f for f in _received_until_pong(client) if f.get("type") == "job"]
            assert [(f["job"]["revision"], f["job"]["status"]) for f in frames] == [(3, "Succeeded")]
    finally:
        front.stop()
