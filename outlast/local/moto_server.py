"""moto in server mode, one request at a time.

moto's internals break under concurrent requests to stream-enabled tables (DESIGN.md, "moto
facts"), so every request goes through one lock. Clients still race each other for real:
the interleaving of their requests, which is what conditional writes must survive, is intact.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class FairLock:
    """A lock taken in arrival order: under a steady stream of pollers, no request starves."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._next_ticket = 0
        self._serving = 0

    def __enter__(self) -> None:
        with self._condition:
            ticket = self._next_ticket
            self._next_ticket += 1
            self._condition.wait_for(lambda: self._serving == ticket)

    def __exit__(self, *_: object) -> None:
        with self._condition:
            self._serving += 1
            self._condition.notify_all()


class SerializedApp:
    """WSGI middleware that lets one request into moto at a time, first come, first served.

    Clients should not long-poll SQS through it: a waiting ReceiveMessage holds the line.
    """

    def __init__(self, app: WsgiApp) -> None:
        self._app = app
        self._lock = FairLock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with self._lock:
            # Materialize the body inside the lock: moto builds responses lazily in places.
            return list(self._app(environ, start_response))


class MotoServer:
    """A serialized moto server on a background thread (tests) or the main thread (local mode)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request is noise here
        self._server: BaseWSGIServer = make_server(
            host,
            port,
            SerializedApp(DomainDispatcherApplication(create_backend_app)),
            threaded=True,
            request_handler=MotoRequestHandler,
        )
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        """The URL clients set as AWS_ENDPOINT_URL."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> MotoServer:
        """Serve on a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until shutdown."""
        self._server.serve_forever()

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def main() -> None:
    """`python -m outlast.local.moto_server --port N`: serve until SIGTERM/SIGINT."""
    import argparse  # noqa: PLC0415 - only the command line needs it
    import signal  # noqa: PLC0415

    parser = argparse.ArgumentParser(description="moto in server mode, one request at a time")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    arguments = parser.parse_args()
    server = MotoServer(arguments.host, arguments.port)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.stop, daemon=True).start())
    print(f"moto: {server.endpoint}", flush=True)  # noqa: T201 - the parent process reads this line
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
