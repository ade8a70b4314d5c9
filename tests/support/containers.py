"""Several Lambda execution environments in one process, for concurrency tests.

Lambda never runs two invocations in one execution environment at once, so a function's
modules may keep per-environment state: the Powertools resolver and its request context,
the cached composition root and its clients. Threads sharing one copy of those modules
would race on that state in a way no deployment can. Each `Container` is a private copy of
the function's modules instead, so the races left are the real ones: between concurrent
requests to storage. (Powertools keeps the current event on a class attribute that every
copy shares, so concurrent invocations must carry identical events apart from the request id.)
"""

from __future__ import annotations

import importlib
import sys
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tests.support.lambda_context import FakeLambdaContext

# The modules of a function that hold per-environment state, in import order.
_STATEFUL_MODULES = ("dependencies", "service", "routes", "handler")
_import_lock = threading.Lock()


@dataclass(frozen=True)
class Container:
    """One execution environment of a function: its own resolver and its own clients."""

    handler_module: ModuleType

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        """Run the handler on one event, as the Lambda runtime would."""
        response: dict[str, Any] = self.handler_module.lambda_handler(event, FakeLambdaContext())
        return response


def _private_copy(package: str) -> ModuleType:
    names = [f"{package}.{name}" for name in _STATEFUL_MODULES]
    with _import_lock:
        saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
        try:
            return importlib.import_module(f"{package}.handler")
        finally:
            for name in names:
                sys.modules.pop(name, None)
            sys.modules.update(saved)
            parent = sys.modules[package]
            for name, module in saved.items():
                setattr(parent, name.rpartition(".")[2], module)


def start_containers(package: str, count: int, settings_type: Any) -> list[Container]:
    """`count` environments of a function (e.g. "functions.submit"), each past its cold start.

    Cold starts run one at a time: creating boto3 clients from the default session is not
    thread-safe, and Lambda never creates two in one process anyway.
    """
    containers = []
    for _ in range(count):
        module = _private_copy(package)
        module.build_dependencies(settings_type.from_environ())
        containers.append(Container(module))
    return containers
