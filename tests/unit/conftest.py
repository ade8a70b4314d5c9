"""Unit tests: fakes only, and no socket may connect anywhere (not moto, not the internet)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore
from tests.support.worker_world import World

UNIT_DIR = Path(__file__).resolve().parent
NETWORK_BLOCKED = "unit tests must not open network connections; use the fakes in tests/fakes.py"


def _refuse_connection(*_: Any, **__: Any) -> NoReturn:
    # RuntimeError, not OSError: botocore and friends retry OSErrors, which would hide the attempt.
    raise RuntimeError(NETWORK_BLOCKED)


@pytest.fixture(autouse=True)
def _block_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _refuse_connection)
    monkeypatch.setattr(socket.socket, "connect_ex", _refuse_connection)
    monkeypatch.setattr(socket, "create_connection", _refuse_connection)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # This hook sees every collected item, not only this directory's: mark just the unit tests.
    for item in items:
        if item.path.is_relative_to(UNIT_DIR):
            item.add_marker(pytest.mark.unit)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def repository() -> InMemoryJobRepository:
    return InMemoryJobRepository()


@pytest.fixture
def payloads() -> InMemoryPayloadStore:
    return InMemoryPayloadStore()


@pytest.fixture
def make_world() -> Iterator[Callable[..., World]]:
    """Worlds with whichever fakes a test swaps in; their thread pools close after the test."""
    made: list[World] = []

    def make(**fakes: Any) -> World:
        made.append(World(**fakes))
        return made[-1]

    yield make
    for world in made:
        world.close()


@pytest.fixture
def world(make_world: Callable[..., World]) -> World:
    return make_world()
