"""The web console on its own origin in local mode: the built files, config.json and CloudFront's headers.

The console is served as CloudFront serves it in AWS: the same files (infra.console_build), the
same security headers and CSP (infra.console_policy, with local origins in connect-src), and a
config.json naming the local API and the local front's /oauth2 endpoints, so the console runs
the same code here as there. Its own port makes it its own origin, so the browser checks the
API's CORS as it would against API Gateway.
"""

from __future__ import annotations

import json
import mimetypes
import sys
import threading
import urllib.parse
from collections.abc import Mapping, Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from infra.console_policy import CACHE_CONTROL, security_headers
from outlast.local.http_handler import LocalRequestHandler

_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".html": "text/html; charset=utf-8", ".svg": "image/svg+xml", ".map": "application/json",
          ".json": "application/json"}  # fmt: skip


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], site: Path) -> None:
        super().__init__(address, _Handler)
        self.site = site.resolve()
        self.headers: dict[str, str] = {}
        self.config = b"{}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(LocalRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if path == "/config.json":
            self._send(200, "application/json", self.server.config)
            return
        name = "index.html" if path == "/" else path.lstrip("/")
        file = (self.server.site / name).resolve()
        # Nothing outside the build directory, and no directory listings (S3 has none either).
        if not file.is_relative_to(self.server.site) or not file.is_file():
            self._send(404, "text/plain; charset=utf-8", b"Not Found")
            return
        content_type = (
            _TYPES.get(file.suffix) or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        )
        self._send(200, content_type, file.read_bytes())

    def do_HEAD(self) -> None:
        self.do_GET()

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        for key, value in self.server.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", CACHE_CONTROL)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class ConsoleFront:
    """The console's files on a loopback port, in a background thread."""

    def __init__(self, site: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        """Binds the port at once: the API's CORS and the app client name the console's origin."""
        self._server = _Server((host, port), site)
        self._thread = threading.Thread(target=self._server.serve_forever, name="console-front", daemon=True)

    @property
    def origin(self) -> str:
        """http://127.0.0.1:PORT: what the API's CORS allows, locally."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def url(self) -> str:
        """The console's address (its redirect and sign-out URI too)."""
        return self.origin + "/"

    def configure(self, config: Mapping[str, Any], connect_origins: Sequence[str]) -> None:
        """config.json and the CSP's connect-src, once the stack knows every URL (before `start`)."""
        self._server.config = json.dumps(config, indent=2).encode()
        self._server.headers = security_headers(connect_origins, https=False)

    def start(self) -> ConsoleFront:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
