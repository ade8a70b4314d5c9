"""Fault injection: make one adapter method fail once, as a crash between two writes would."""

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
