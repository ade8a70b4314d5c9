"""Fault injection: make one method fail once, as an error between two writes would, or kill the
whole invocation there, as a crash (out of memory, a dead runtime) would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

INJECTED_FAULT_TEXT = "injected fault: lease token 7f3e, fingerprint 9a1b"


class InjectedFaultError(RuntimeError):
    """The failure a test injected (its text must never reach a caller)."""


def fail_once(monkeypatch: pytest.MonkeyPatch, owner: type, method: str) -> list[int]:
    """Make `owner.method` raise on its first call and behave normally afterwards.

    Returns a list that counts the calls made, so a test can check the fault was hit.
    """
    original: Callable[..., Any] = getattr(owner, method)
    calls: list[int] = []

    def flaky(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise InjectedFaultError(INJECTED_FAULT_TEXT)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(owner, method, flaky)
    return calls


class WorkerCrash(BaseException):
    """The invocation dies here: nothing in the function can catch it, as nothing can catch a kill.

    A BaseException, so the worker's own `except Exception` (which hands a job back on an error)
    never sees it; the in-process Lambda runner reports the invocation as failed.
    """


def crash_once(monkeypatch: pytest.MonkeyPatch, owner: type, method: str) -> list[int]:
    """Make the invocation die on the first call of `owner.method`; later calls behave normally."""
    original: Callable[..., Any] = getattr(owner, method)
    calls: list[int] = []

    def dying(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise WorkerCrash(INJECTED_FAULT_TEXT)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(owner, method, dying)
    return calls
