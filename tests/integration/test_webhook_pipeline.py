"""Notifier -> webhooks queue -> sender on moto, with a receiver on 127.0.0.1.

The notifier's handler gets stream records built from job items as the repository writes them;
the sender's handler is driven by the same SQS poller local mode uses (batch, partial failures),
against the real table, queue and DLQ. Signatures are checked with the spec's algorithm
written out here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest

from functions.notifier.handler import lambda_handler as notifier_handler
from functions.webhook_sender.handler import lambda_handler as sender_handler
from outlast.local.event_sources import SqsSource
from shared import resources as r
from shared.adapters.dynamodb_webhooks import DynamoEndpointStore
from shared.job import JobRecord
from shared.lifecycle import JobStatus
from shared.webhooks.endpoints import ALL_EVENTS, DeliveryState, Endpoint, EndpointSecrets, new_endpoint_id
from shared.webhooks.signing import generate_secret
from tests.fakes import job_record
from tests.support.aws import (
    REGION,
    create_connections_table,
    create_webhooks_queues,
    create_webhooks_table,
)
from tests.support.events import job_stream_record
from tests.support.lambda_context import FakeLambdaContext

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:No application metrics")]

NOW = datetime(2030, 3, 17, 17, 46, 31, 870_000, tzinfo=UTC)


@dataclass
class Receiver:
    """Answers each POST with the next status of its script (the last repeats); records them all."""

    script: list[int]
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.script.pop(0) if len(receiver.script) > 1 else receiver.script[0]
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@dataclass
class Pipeline:
    store: DynamoEndpointStore
    sqs: Any
    queue_url: str
    dlq_url: str

    def endpoint(self, url: str, tenant: str = "acme") -> tuple[Endpoint, str]:
        endpoint = Endpoint(
            endpoint_id=new_endpoint_id(), tenant=tenant, url=url, events=ALL_EVENTS, created_at=NOW
        )
        secret = generate_secret()
        self.store.add_endpoint(endpoint, EndpointSecrets(current=secret))
        return endpoint, secret

    def notify(self, *jobs: JobRecord) -> dict[str, Any]:
        records = [_record(job, sequence) for sequence, job in enumerate(jobs, start=1)]
        response: dict[str, Any] = notifier_handler({"Records": records}, FakeLambdaContext())
        return response

    def send_once(self, idle_sleep: float = 0.1) -> int:
        """One poll of the sender's queue by the local-mode poller: how many messages it handed over."""
        arn = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        source = SqsSource(
            sqs=self.sqs,
            queue_url=self.queue_url,
            queue_arn=arn["Attributes"]["QueueArn"],
            invoke=lambda event: sender_handler(event, FakeLambdaContext()),
        )
        return source.poll(idle_sleep=idle_sleep)

    def visible(self, url: str) -> list[dict[str, Any]]:
        messages = self.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
        ).get("Messages", [])
        return list(messages)


@pytest.fixture
def pipeline(resources: object, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    assert resources
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    table = create_webhooks_table(endpoint)
    queue_url, dlq_url = create_webhooks_queues(endpoint)
    monkeypatch.setenv(r.ENV_CONNECTIONS_TABLE, create_connections_table(endpoint))
    monkeypatch.setenv(r.ENV_CONNECTIONS_ENDPOINT, "http://127.0.0.1:9/unused")  # no connections
    for name, value in {
        r.ENV_WEBHOOKS_TABLE: table,
        r.ENV_WEBHOOKS_QUEUE_URL: queue_url,
        r.ENV_WEBHOOKS_DLQ_URL: dlq_url,
        r.ENV_WEBHOOK_LOCAL_EGRESS: "true",
        r.ENV_WEBHOOK_RETRY_SCALE: "0.0001",
    }.items():
        monkeypatch.setenv(name, value)
    dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION)
    return Pipeline(
        DynamoEndpointStore(dynamodb, table),
        boto3.client("sqs", endpoint_url=endpoint, region_name=REGION),
        queue_url,
        dlq_url,
    )


@pytest.fixture
def receiver(request: pytest.FixtureRequest) -> Iterator[Receiver]:
    started = Receiver(script=list(getattr(request, "param", [200]))).start()
    yield started
    started.stop()


def _record(job: JobRecord, sequence: int) -> dict[str, Any]:
    kind = (
        "terminal" if job.status in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELED} else "claim"
    )
    return job_stream_record(job, sequence, kind)


def _succeeded(tenant: str = "acme") -> JobRecord:
    return job_record(NOW, tenant=tenant, owner="alice-sub", status=JobStatus.SUCCEEDED, revision=4)


def _signature(secret: str, headers: dict[str, str], body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def test_a_terminal_write_is_enqueued_signed_posted_and_recorded(
    pipeline: Pipeline, receiver: Receiver
) -> None:
    endpoint, secret = pipeline.endpoint(receiver.url)
    pipeline.endpoint(receiver.url, tenant="globex")  # another tenant: nothing for it
    job = _succeeded()

    assert pipeline.notify(job.model_copy(update={"status": JobStatus.RUNNING, "revision": 3}), job) == {
        "batchItemFailures": []
    }
    assert pipeline.send_once() == 1

    ((headers, body),) = receiver.received
    assert headers["webhook-id"] == f"{job.job_id}.0.job.succeeded"
    assert headers["webhook-signature"] == _signature(secret, headers, body)
    assert json.loads(body)["data"]["owner"] == {"tenant": "acme", "sub": "alice-sub"}
    (delivery,) = pipeline.store.deliveries_of(endpoint.endpoint_id, 10)
    assert delivery.state is DeliveryState.DELIVERED
    assert pipeline.visible(pipeline.queue_url) == []


def test_a_duplicate_stream_record_is_enqueued_twice_and_posted_once(
    pipeline: Pipeline, receiver: Receiver
) -> None:
    pipeline.endpoint(receiver.url)
    job = _succeeded()

    pipeline.notify(job, job)
    while pipeline.send_once():
        pass

    assert len(receiver.received) == 1


@pytest.mark.parametrize("receiver", [[503]], indirect=True)
def test_a_failed_attempt_is_hidden_for_its_wait_then_dead_lettered_after_seven(
    pipeline: Pipeline, receiver: Receiver
) -> None:
    endpoint, _ = pipeline.endpoint(receiver.url)
    pipeline.notify(_succeeded())

    assert pipeline.send_once() == 1
    assert pipeline.visible(pipeline.queue_url) == []  # hidden for its 1 s wait, not deleted
    while len(receiver.received) < 7:
        pipeline.send_once()

    (delivery,) = pipeline.store.deliveries_of(endpoint.endpoint_id, 10)
    assert [a.status for a in delivery.attempts] == [503] * 7
    assert delivery.state is DeliveryState.DEAD
    (parked,) = pipeline.visible(pipeline.dlq_url)
    assert parked["MessageAttributes"]["reason"]["StringValue"] == "attempts_exhausted"
    assert json.loads(parked["Body"])["endpointId"] == endpoint.endpoint_id
    assert pipeline.visible(pipeline.queue_url) == []
