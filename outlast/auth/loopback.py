"""The loopback redirect of one sign-in: a one-shot HTTP server on 127.0.0.1 that waits for the
browser to come back with `?code=...&state=...` (RFC 8252).

It binds the first free port of the registered ones, never any other address, answers only
GET /callback, and takes a code only with the `state` this sign-in sent: a request with another
state (a page trying to slip its own code in) is refused and the wait goes on.
"""

from __future__ import annotations

import html
import secrets
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Self

from outlast.auth.callbacks import CALLBACK_HOST, CALLBACK_PATH, CALLBACK_PORTS, callback_url


class SignInError(Exception):
    """The sign-in did not produce a code (refused, timed out, no port to listen on)."""


@dataclass(frozen=True)
class Redirect:
    """What came back to the redirect URI: a code, or the authorization server's error."""

    code: str | None
    error: str | None


def _page(title: str, text: str) -> bytes:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title></head><body><main><h1>{html.escape(title)}</h1>"
        f"<p>{html.escape(text)}</p></main></body></html>"
    ).encode()


class _Server(HTTPServer):
    def __init__(self, port: int, state: str) -> None:
        super().__init__((CALLBACK_HOST, port), _Handler)
        self.state = state
        self.redirect: Redirect | None = None
        self.arrived = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        parts = urllib.parse.urlsplit(self.path)
        if parts.path != CALLBACK_PATH:
            self._answer(404, _page("Not found", "This address only takes the sign-in's redirect."))
            return
        query = dict(urllib.parse.parse_qsl(parts.query))
        if not secrets.compare_digest(query.get("state", ""), self.server.state):
            self._answer(
                400, _page("Sign-in refused", "This redirect does not belong to the sign-in under way.")
            )
            return
        if self.server.arrived.is_set():
            self._answer(400, _page("Already done", "This sign-in already came back."))
            return
        redirect = Redirect(code=query.get("code") or None, error=query.get("error") or None)
        if redirect.code is None and redirect.error is None:
            redirect = Redirect(code=None, error="invalid_request")
        if redirect.code is not None:
            self._answer(200, _page("Signed in", "outlast has the sign-in: you can close this tab."))
        else:
            self._answer(400, _page("Sign-in failed", f"The sign-in was refused ({redirect.error})."))
        self.server.redirect = redirect
        self.server.arrived.set()

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the query string holds the code."""


class LoopbackRedirect:
    """Listens on the first free registered port until the browser comes back (use `with`)."""

    def __init__(self, state: str, ports: tuple[int, ...] = CALLBACK_PORTS) -> None:
        self._server: _Server | None = None
        for port in ports:
            try:
                self._server = _Server(port, state)
                break
            except OSError:
                continue
        if self._server is None:
            raise SignInError(
                "every port registered for the sign-in redirect is in use "
                f"({', '.join(str(p) for p in ports)} on {CALLBACK_HOST}): free one and try again"
            )
        self._thread = threading.Thread(target=self._server.serve_forever, name="outlast-login", daemon=True)

    @property
    def redirect_uri(self) -> str:
        """The registered redirect URI this sign-in uses."""
        assert self._server is not None  # noqa: S101 - set in __init__ or it raised
        return callback_url(self._server.server_address[1])

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        assert self._server is not None  # noqa: S101
        self._server.shutdown()
        self._server.server_close()

    def wait(self, timeout_seconds: float) -> Redirect:
        """The redirect, once the browser brings it; SignInError when none comes in time."""
        assert self._server is not None  # noqa: S101
        if not self._server.arrived.wait(timeout_seconds):
            raise SignInError(f"no sign-in came back within {timeout_seconds:.0f} s")
        assert self._server.redirect is not None  # noqa: S101
        return self._server.redirect
