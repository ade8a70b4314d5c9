"""A recording stand-in for API Gateway's `@connections` API, for handler tests on moto.

POST /@connections/{id} to a connection the test opened records the frame (200); to any other
answers 410 with `x-amzn-ErrorType: GoneException`, as API Gateway does. DELETE closes one.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote


class RecordingManagementApi:
    """Open connections and what each received, behind a loopback HTTP server."""

    def __init__(self) -> None:
        self.open: set[str] = set()
        self.received: dict[str, list[str]] = defaultdict(list)
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: object) -> None:
                return

            def _connection(self) -> str:
                return unquote(self.path.rsplit("/", 1)[-1])

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8")
                with api._lock:
                    delivered = self._connection() in api.open
                    if delivered:
                        api.received[self._connection()].append(body)
                self._answer(200 if delivered else 410)

            def do_DELETE(self) -> None:
                with api._lock:
                    api.open.discard(self._connection())
                self._answer(204)

            def _answer(self, status: int) -> None:
                self.send_response(status)
                if status == 410:
                    self.send_header("x-amzn-ErrorType", "GoneException")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The endpoint a management client is made with."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/live"

    def start(self) -> RecordingManagementApi:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def connect(self, connection_id: str) -> None:
        """A client opened this connection."""
        with self._lock:
            self.open.add(connection_id)
