"""Integration fixtures: one serialized moto server per session, fresh resources per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from outlast.local.moto_server import MotoServer
from tests.support.aws import TestResources, create_resources


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    server = MotoServer().start()
    yield server.endpoint
    server.stop()


@pytest.fixture
def resources(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> TestResources:
    """Fresh resources, and the environment the functions read pointed at them."""
    created = create_resources(moto_endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    for name, value in created.environment().items():
        monkeypatch.setenv(name, value)
    return created


# The fake API and the sign-in server of the command line's tests, for the exit-code scenarios too.
from tests.integration.test_cli_client import api, fake_time  # noqa: E402, F401
from tests.integration.test_cli_login import browser, signin_server  # noqa: E402, F401
