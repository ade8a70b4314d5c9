"""Local mode's fault hook: every function's handler wrapped by a module the caller names.

Production code carries no hook, and local mode knows no fault: a tool that injects faults
from the outside (chaos does, with outlast/chaos/shim.py) sets `LocalOptions.fault_hook` to a
`FaultHook`, naming a module importable in the function processes and the environment it
needs. Each function process then runs `outlast.local.fault_hook.lambda_handler` instead of its
template handler string; the real handler string and the hook's module travel in the process's
environment (`OUTLAST_FAULT_HOOK_HANDLER`, `OUTLAST_FAULT_HOOK_MODULE`), beside the hook's own
variables. On the process's first event this imports the real handler, then the hook module,
and calls the module's `wrap(handler, handler_string)` once; the handler it returns takes every
event of the process.

It composes with the IAM bootstrap (outlast/local/iam/bootstrap.py) without either knowing the
other: the bootstrap installs the role's guard and runs awslambdaric with whatever handler
string the function has, this one included, so the hook runs under the function's role too.
The hook's `description` is what the state file shows under its `chaos` key (null without a
hook), the name its one reader, chaos, knows it by.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

ENV_MODULE = "OUTLAST_FAULT_HOOK_MODULE"
ENV_HANDLER = "OUTLAST_FAULT_HOOK_HANDLER"
HOOK_HANDLER = "outlast.local.fault_hook.lambda_handler"

Handler = Callable[[Any, Any], Any]


class Wrap(Protocol):
    """What a hook module's `wrap` is: the real handler (and its string) in, the handler to run out."""

    def __call__(self, handler: Handler, handler_string: str) -> Handler: ...


@dataclass(frozen=True)
class FaultHook:
    """A module whose `wrap` every function's handler goes through, and what it needs to know."""

    module: str  # importable in the function processes; it defines `wrap` (see Wrap)
    environment: Mapping[str, str] = field(default_factory=dict)  # added to every function's
    description: dict[str, Any] | None = None  # for the state file

    def apply(self, handler: str, environment: Mapping[str, str]) -> tuple[str, dict[str, str]]:
        """A function's handler string and environment, under this hook."""
        hooked = {**environment, **self.environment, ENV_MODULE: self.module, ENV_HANDLER: handler}
        return HOOK_HANDLER, hooked


def load(handler_string: str, module: str) -> Handler:
    """Import the real handler, then the hook module, and return what the hook makes of the handler."""
    module_name, _, attribute = handler_string.rpartition(".")
    handler: Handler = getattr(importlib.import_module(module_name), attribute)
    wrap: Wrap = importlib.import_module(module).wrap
    return wrap(handler, handler_string)


@functools.cache
def _hooked(handler_string: str, module: str) -> Handler:
    # Once per process: Lambda gives a process one event at a time, the first one loads the hook.
    return load(handler_string, module)


def lambda_handler(event: Any, context: Any) -> Any:
    """The handler a function process runs under a hook: the real one, as the hook wrapped it."""
    return _hooked(os.environ[ENV_HANDLER], os.environ[ENV_MODULE])(event, context)
