"""Every HTTP server of local mode answers without Nagle's algorithm.

BaseHTTPRequestHandler writes the headers and the body of an answer in two writes. On a
keep-alive connection Nagle then holds the body back until the client acknowledges the headers,
which a client delays by about 40 ms: every local model call, API request and Runtime API
invoke would pay it, and the benchmarks and the end-to-end tests would measure it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from http.server import BaseHTTPRequestHandler

import outlast.local


def _handlers() -> list[type[BaseHTTPRequestHandler]]:
    found: list[type[BaseHTTPRequestHandler]] = []
    for module_info in pkgutil.iter_modules(outlast.local.__path__, "outlast.local."):
        module = importlib.import_module(module_info.name)
        found += [
            value
            for value in vars(module).values()
            if inspect.isclass(value)
            and issubclass(value, BaseHTTPRequestHandler)
            and value.__module__ == module.__name__
        ]
    return found


def test_every_local_http_handler_disables_nagle() -> None:
    handlers = {f"{handler.__module__}.{handler.__qualname__}": handler for handler in _handlers()}
    assert {"outlast.local.model_server._Handler", "outlast.local.http_front._Handler"} <= handlers.keys()
    assert [name for name, handler in handlers.items() if not handler.disable_nagle_algorithm] == []
