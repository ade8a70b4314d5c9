"""Every HTTP server of local mode answers without Nagle's algorithm.

BaseHTTPRequestHandler writes the headers and the body of an answer in two writes. On a
keep-alive connection Nagle then holds the body back until the client acknowledges the headers,
which a client delays by about 40 ms: every local model call, API request and Runtime API
invoke would pay it, and the benchmarks and the end-to-end tests would measure it.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

import outlast.local
from tests.support.modules import defined_subclasses


def test_every_local_http_handler_disables_nagle() -> None:
    handlers = {
        f"{module.__name__}.{handler.__qualname__}": handler
        for module, handler in defined_subclasses((outlast.local,), BaseHTTPRequestHandler)
    }
    assert {"outlast.local.model_server._Handler", "outlast.local.http_front._Handler"} <= handlers.keys()
    assert [name for name, handler in handlers.items() if not handler.disable_nagle_algorithm] == []
