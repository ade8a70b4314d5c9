"""once(): a composition root's client made on first use, and only then, however many ask."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from shared.lazy import once


def test_nothing_is_made_until_asked_and_then_only_once() -> None:
    made: list[object] = []

    def make() -> object:
        made.append(object())
        return made[-1]

    client = once(make)

    assert made == []
    first, second = client(), client()
    assert first is second
    assert len(made) == 1


def test_callers_at_the_same_moment_get_the_one_object() -> None:
    # Given a factory slow enough for every caller to arrive while it runs
    calls: list[int] = []
    started = threading.Event()

    def make() -> object:
        calls.append(1)
        started.set()
        threading.Event().wait(0.05)
        return object()

    client = once(make, threading.Lock())
    arrive = threading.Barrier(8)

    def ask(_: int) -> object:
        arrive.wait()
        return client()

    # When eight threads ask at once
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(ask, range(8)))

    # Then the factory ran once and all eight hold its object
    assert started.is_set()
    assert calls == [1]
    assert len({id(item) for item in got}) == 1
