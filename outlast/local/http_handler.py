"""The request handler every local HTTP server builds on: keep-alive, no Nagle, quiet."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any


class LocalRequestHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, as the SDKs' and browsers' connection pools expect, without Nagle.

    http.server writes an answer's headers and its body in two writes. On a keep-alive
    connection Nagle's algorithm then holds the body until the client acknowledges the headers,
    which a client delays by about 40 ms: every local model call, API request and Runtime API
    invoke would pay it (a local chat completion took 43.8 ms with it, 1.6 ms without).
    """

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """No access log: each local server reports what matters itself."""
        return
