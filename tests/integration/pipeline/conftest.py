"""Fixtures for the asynchronous half: queues, the model server, the secret and the pipeline."""

from __future__ import annotations

import secrets
import urllib.request
from collections.abc import Iterator

import boto3
import pytest

from outlast.local.model_server import ModelServer
from tests.support.aws import REGION, TestResources
from tests.support.pipeline import Pipeline, create_queues

MAX_ATTEMPTS = 3
WORKER_TIMEOUT_SECONDS = 30.0


@pytest.fixture(scope="session")
def model_server() -> Iterator[ModelServer]:
    server = ModelServer().start()
    yield server
    server.stop()


@pytest.fixture
def pipeline(
    moto_endpoint: str, resources: TestResources, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> Pipeline:
    """A fresh pipeline with fast timings: 2 s leases, 0.2 s heartbeats, 1 s backoff base."""
    suffix = secrets.token_hex(4)
    queues = create_queues(moto_endpoint, suffix, MAX_ATTEMPTS, visibility_seconds=5)
    secret = boto3.client("secretsmanager", endpoint_url=moto_endpoint, region_name=REGION).create_secret(
        Name=f"openai-{suffix}", SecretString="sk-local-test"
    )
    base = model_server.url.removesuffix("/v1")
    for path in ("/_faults/reset", "/_calls/reset"):
        urllib.request.urlopen(urllib.request.Request(base + path, method="POST"), timeout=10).close()  # noqa: S310
    environment = {
        "JOBS_QUEUE_URL": queues.jobs_url,
        "JOBS_DLQ_URL": queues.dlq_url,
        "ISOLATION_QUEUE_URL": queues.isolation_url,
        "ISOLATION_QUEUE_ARN": queues.isolation_arn,
        "ISOLATION_DLQ_URL": queues.isolation_dlq_url,
        "OPENAI_SECRET_ARN": secret["ARN"],
        "OPENAI_BASE_URL": model_server.url,
        "MAX_ATTEMPTS": str(MAX_ATTEMPTS),
        "LEASE_SECONDS": "2",
        "HEARTBEAT_SECONDS": "0.2",
        "PROVIDER_TIMEOUT_SECONDS": "1",
        "BACKOFF_BASE_SECONDS": "1",
        "BACKOFF_CAP_SECONDS": "20",
        "RELEASE_MARGIN_SECONDS": "2",
        "DISPATCH_GRACE_SECONDS": "3",
        "SWEEP_LOOK_SECONDS": "1",
        "SECRET_MAX_AGE_SECONDS": "0",
    }
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    return Pipeline(
        endpoint=moto_endpoint,
        resources=resources,
        queues=queues,
        model_url=model_server.url,
        worker_timeout_seconds=WORKER_TIMEOUT_SECONDS,
    )


@pytest.fixture
def patient_pipeline(
    pipeline: Pipeline, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Pipeline]:
    """The pipeline with a 10 s provider timeout, for [[delay:N]] calls that must be allowed to finish.

    On teardown it waits for the model server to go idle: a call the worker abandoned (released,
    canceled, lease lost) still finishes on the server, and must not land in the next test's call log.
    """
    monkeypatch.setenv("PROVIDER_TIMEOUT_SECONDS", "10")
    yield pipeline
    pipeline.wait_for(lambda: model_server.in_flight == 0, timeout_seconds=30)
