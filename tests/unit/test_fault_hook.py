"""Local mode's fault hook: a module the caller names wraps every function's handler, configured
from outside (chaos's shim is one such module; local mode knows none)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from outlast.local import fault_hook
from outlast.local.fault_hook import ENV_HANDLER, ENV_MODULE, HOOK_HANDLER, FaultHook, Handler, load

pytestmark = pytest.mark.unit


@pytest.fixture
def hook_module() -> Iterator[list[tuple[str, Any]]]:
    """A hook module `probe_hook` that records each event before the real handler takes it."""
    seen: list[tuple[str, Any]] = []
    module = types.ModuleType("probe_hook")

    def wrap(handler: Handler, handler_string: str) -> Handler:
        seen.append(("wrapped", handler_string))

        def hooked(event: Any, context: Any) -> Any:
            seen.append((handler_string, event))
            return handler(event, context)

        return hooked

    module.wrap = wrap  # type: ignore[attr-defined]
    real = types.ModuleType("probe_functions")
    real.handler = lambda event, _context: {"echo": event}  # type: ignore[attr-defined]
    sys.modules.update(probe_hook=module, probe_functions=real)
    yield seen
    del sys.modules["probe_hook"], sys.modules["probe_functions"]


def test_a_hooked_function_runs_the_hooks_entry_with_the_real_handler_in_its_environment() -> None:
    hook = FaultHook("probe_hook", {"PROBE_SETTING": "1"}, {"seed": 3})

    handler, environment = hook.apply("functions.submit.handler.lambda_handler", {"TABLE": "jobs"})

    assert handler == HOOK_HANDLER == f"{fault_hook.__name__}.lambda_handler"
    assert environment == {
        "TABLE": "jobs",
        "PROBE_SETTING": "1",
        ENV_MODULE: "probe_hook",
        ENV_HANDLER: "functions.submit.handler.lambda_handler",
    }


def test_the_hook_wraps_the_real_handler_and_sees_every_event(hook_module: list[tuple[str, Any]]) -> None:
    handler = load("probe_functions.handler", "probe_hook")

    assert handler({"n": 1}, None) == {"echo": {"n": 1}}
    assert handler({"n": 2}, None) == {"echo": {"n": 2}}
    assert hook_module == [
        ("wrapped", "probe_functions.handler"),
        ("probe_functions.handler", {"n": 1}),
        ("probe_functions.handler", {"n": 2}),
    ]


def test_the_process_entry_loads_the_hook_once_from_its_environment(
    hook_module: list[tuple[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, environment = FaultHook("probe_hook").apply("probe_functions.handler", {})
    for name, value in environment.items():
        monkeypatch.setenv(name, value)

    answers = [fault_hook.lambda_handler({"n": n}, None) for n in range(3)]

    assert answers == [{"echo": {"n": n}} for n in range(3)]
    wrapped = [entry for entry in hook_module if entry[0] == "wrapped"]
    assert wrapped == [("wrapped", "probe_functions.handler")]  # once per process
