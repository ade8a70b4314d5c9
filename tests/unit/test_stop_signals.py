"""The main thread's wait for Ctrl-C ends even when another thread took the signal."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from outlast.local.stop_signals import StopSignals

RESCUE_AFTER_SECONDS = 30


@pytest.fixture
def stop() -> Iterator[StopSignals]:
    installed = StopSignals().install()
    yield installed
    installed.restore()


def _until_parked_in_wait(thread_id: int) -> None:
    """Return once that thread runs `StopSignals.wait` (a signal sent earlier would be handled while
    the main thread still runs bytecode, and would prove nothing)."""
    while (frame := sys._current_frames().get(thread_id)) is not None:
        while frame is not None:
            if frame.f_code is StopSignals.wait.__code__:
                return
            frame = frame.f_back
        time.sleep(0.01)


def _signal_from_another_thread(signum: int) -> tuple[threading.Event, list[str]]:
    """A thread sends `signum` to itself (so the kernel cannot pick the main thread); if the main
    thread has not stopped waiting long after, a second signal aimed at the main thread rescues
    the test and is recorded, so that a regression fails instead of hanging."""
    waited = threading.Event()
    rescues: list[str] = []
    main = threading.main_thread().ident
    assert main is not None

    def run() -> None:
        _until_parked_in_wait(main)
        signal.pthread_kill(threading.get_ident(), signum)
        if not waited.wait(RESCUE_AFTER_SECONDS):
            rescues.append("the main thread never saw the signal")
            signal.pthread_kill(main, signum)

    threading.Thread(target=run, daemon=True).start()
    return waited, rescues


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_taken_by_another_thread_ends_the_wait(stop: StopSignals, signum: int) -> None:
    assert threading.current_thread() is threading.main_thread()
    waited, rescues = _signal_from_another_thread(signum)

    received = stop.wait()
    waited.set()

    assert rescues == []
    assert received == signum
    assert stop.stop_requested


def test_a_signal_before_the_wait_is_not_lost(stop: StopSignals) -> None:
    signal.raise_signal(signal.SIGINT)

    assert stop.stop_requested
    assert stop.wait() == signal.SIGINT


def test_restore_gives_the_signals_back() -> None:
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    stop = StopSignals().install()
    assert signal.getsignal(signal.SIGINT) != before[signal.SIGINT]

    stop.restore()

    assert {signum: signal.getsignal(signum) for signum in before} == before
