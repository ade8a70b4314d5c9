"""The webhook HTTP adapter against real local receivers: pinned address, TLS, deadline, no redirects."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import trustme

from shared.adapters.webhook_http import USER_AGENT, HttpWebhookPoster, resolve_system
from shared.errors import EgressRefusedError
from shared.ports import TransportFailure
from shared.webhooks import signing
from shared.webhooks.egress import Destination, check_url

HOST = "receiver.test"  # RFC 6761: never resolves, so only the pinned address can be reached
SECRET = signing.generate_secret()
MESSAGE_ID = "6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b.0.job.succeeded"
BODY = b'{"type":"job.succeeded","timestamp":"2030-03-17T17:46:40.000Z","data":{}}'
NOW = 1_900_000_000
SHORT_TIMEOUT = 0.5


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A local HTTP(S) receiver: answers by path and records what arrived."""

    server: ThreadingHTTPServer
    requests: list[Received] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str, scheme: str = "http") -> str:
        return f"{scheme}://{HOST}:{self.port}{path}"


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            receiver.requests.append(Received(self.path, dict(self.headers.items()), self.rfile.read(length)))
            if self.path.startswith("/status/"):
                self._answer(int(self.path.removeprefix("/status/")))
            elif self.path == "/busy":
                self._answer(429, {"Retry-After": "120"})
            elif self.path == "/moved":
                self._answer(302, {"Location": f"http://127.0.0.1:{receiver.port}/landing"})
            else:
                self._answer(200)

        def _answer(self, status: int, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serving(tls: ssl.SSLContext | None = None) -> Iterator[Receiver]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    receiver = Receiver(server)
    server.RequestHandlerClass = _handler(receiver)
    if tls is not None:
        tls.sni_callback = lambda _sock, name, _ctx: receiver.server_names.append(name)
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with serving() as started:
        yield started


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def client_tls(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def _server_tls(ca: trustme.CA, *names: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    return context


def local(url: str) -> Destination:
    """The Destination the guard gives in local mode, HOST resolving to loopback."""
    return check_url(url, lambda host, _port: ["127.0.0.1"] if host == HOST else [], local_only=True)


def poster(timeout: float = 10.0) -> HttpWebhookPoster:
    return HttpWebhookPoster(ssl.create_default_context(), timeout_seconds=timeout)


def signed() -> dict[str, str]:
    return signing.signed_headers([SECRET], MESSAGE_ID, NOW, BODY)


class TestAnswers:
    def test_a_2xx_is_delivered(self, receiver: Receiver) -> None:
        result = poster().post(local(receiver.url("/hook")), BODY, signed())

        assert (result.status, result.failure, result.delivered) == (200, None, True)
        assert result.latency_ms >= 0
        assert [r.path for r in receiver.requests] == ["/hook"]

    @pytest.mark.parametrize("status", [500, 410, 404, 502])
    def test_other_statuses_come_back_as_they_are_and_are_not_delivered(
        self, receiver: Receiver, status: int
    ) -> None:
        result = poster().post(local(receiver.url(f"/status/{status}")), BODY, signed())

        assert (result.status, result.failure, result.delivered) == (status, None, False)

    def test_a_429_brings_its_retry_after(self, receiver: Receiver) -> None:
        result = poster().post(local(receiver.url("/busy")), BODY, signed())

        assert (result.status, result.retry_after, result.delivered) == (429, "120", False)

    def test_a_redirect_is_never_followed(self, receiver: Receiver) -> None:
        result = poster().post(local(receiver.url("/moved")), BODY, signed())

        assert (result.status, result.delivered) == (302, False)
        assert [r.path for r in receiver.requests] == ["/moved"]

    def test_the_request_carries_the_signature_headers_and_the_body_unchanged(
        self, receiver: Receiver
    ) -> None:
        poster().post(local(receiver.url("/hook?tenant=acme")), BODY, signed())

        (request,) = receiver.requests
        assert request.path == "/hook?tenant=acme"
        assert request.body == BODY
        for name, value in signed().items():
            assert request.headers[name] == value
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["User-Agent"] == USER_AGENT
        # What arrived verifies as a receiver would check it.
        signing.verify([SECRET], request.headers, request.body, now=NOW)

    def test_host_and_content_headers_are_the_adapters_own(self, receiver: Receiver) -> None:
        headers = {**signed(), "Host": "evil.example", "content-type": "text/plain", "Content-Length": "1"}

        poster().post(local(receiver.url("/hook")), BODY, headers)

        (request,) = receiver.requests
        assert request.headers["Host"] == f"{HOST}:{receiver.port}"
        assert request.headers["Content-Type"] == "application/json"
        assert request.body == BODY

    def test_environment_proxies_are_ignored(
        self, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with serving() as proxy:
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
                monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
            monkeypatch.delenv("NO_PROXY", raising=False)
            monkeypatch.delenv("no_proxy", raising=False)

            result = poster().post(local(receiver.url("/hook")), BODY, signed())

        assert result.delivered
        assert proxy.requests == []
        assert len(receiver.requests) == 1


class TestTransportFailures:
    def test_a_receiver_that_never_answers_times_out(self) -> None:
        with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never accepts or answers
            port = silent.getsockname()[1]

            result = poster(SHORT_TIMEOUT).post(local(f"http://{HOST}:{port}/hook"), BODY, signed())

        assert (result.status, result.failure) == (None, TransportFailure.TIMEOUT)

    def test_the_timeout_bounds_the_whole_attempt_not_each_read(self) -> None:
        # A byte of headers every 50 ms: each read succeeds well within the timeout, so only a
        # deadline over the whole attempt ends it. Without one, the drip would go on until the
        # server gives up and the result would not be a timeout.
        stop = threading.Event()
        with socket.create_server(("127.0.0.1", 0)) as server:
            port = server.getsockname()[1]
            dripper = threading.Thread(target=_drip, args=(server, stop), daemon=True)
            dripper.start()
            try:
                result = poster(SHORT_TIMEOUT).post(local(f"http://{HOST}:{port}/hook"), BODY, signed())
            finally:
                stop.set()
                dripper.join()

        assert (result.status, result.failure) == (None, TransportFailure.TIMEOUT)

    def test_a_refused_connection_is_a_connection_failure(self) -> None:
        with socket.create_server(("127.0.0.1", 0)) as closed:
            port = closed.getsockname()[1]
        result = poster().post(local(f"http://{HOST}:{port}/hook"), BODY, signed())

        assert (result.status, result.failure) == (None, TransportFailure.CONNECTION)

    def test_an_answer_that_is_not_http_is_a_protocol_failure(self) -> None:
        with socket.create_server(("127.0.0.1", 0)) as server:
            port = server.getsockname()[1]
            answering = threading.Thread(
                target=_answer_once, args=(server, b"SMTP ready\r\n\r\n"), daemon=True
            )
            answering.start()
            result = poster().post(local(f"http://{HOST}:{port}/hook"), BODY, signed())
            answering.join()

        assert (result.status, result.failure) == (None, TransportFailure.PROTOCOL)


class TestTls:
    def test_https_goes_to_the_pinned_address_with_sni_and_verification_for_the_host(
        self, ca: trustme.CA, client_tls: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        asked: list[str | bytes | None] = []
        real_getaddrinfo = socket.getaddrinfo

        def recording_getaddrinfo(host: str | bytes | None, *args: Any, **kwargs: Any) -> Any:
            asked.append(host)
            return real_getaddrinfo(host, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", recording_getaddrinfo)
        with serving(_server_tls(ca, HOST)) as tls_receiver:
            destination = local(tls_receiver.url("/hook", scheme="https"))
            result = HttpWebhookPoster(client_tls).post(destination, BODY, signed())

        assert (result.status, result.failure) == (200, None)
        assert tls_receiver.server_names == [HOST]
        assert tls_receiver.requests[0].headers["Host"] == f"{HOST}:{tls_receiver.port}"
        assert HOST not in asked  # the name is never resolved again
        assert destination.address == "127.0.0.1"

    def test_a_certificate_for_another_host_fails_before_anything_is_sent(
        self, ca: trustme.CA, client_tls: ssl.SSLContext
    ) -> None:
        with serving(_server_tls(ca, "other.test")) as tls_receiver:
            result = HttpWebhookPoster(client_tls).post(
                local(tls_receiver.url("/hook", scheme="https")), BODY, signed()
            )

        assert (result.status, result.failure) == (None, TransportFailure.TLS)
        assert tls_receiver.requests == []

    def test_a_certificate_from_an_untrusted_ca_fails(self, ca: trustme.CA) -> None:
        with serving(_server_tls(ca, HOST)) as tls_receiver:
            # The system store does not know the test CA.
            result = poster().post(local(tls_receiver.url("/hook", scheme="https")), BODY, signed())

        assert (result.status, result.failure) == (None, TransportFailure.TLS)
        assert tls_receiver.requests == []


def _drip(server: socket.socket, stop: threading.Event) -> None:
    server.settimeout(5)
    connection, _ = server.accept()
    with connection:
        chunk = b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 400
        for byte in chunk:
            if stop.wait(0.05):
                return
            try:
                connection.sendall(bytes([byte]))
            except OSError:  # the client hung up at its deadline
                return


def _answer_once(server: socket.socket, answer: bytes) -> None:
    server.settimeout(5)
    connection, _ = server.accept()
    with connection:
        connection.recv(65536)
        connection.sendall(answer)


class TestSystemResolver:
    def test_an_address_literal_resolves_to_itself(self) -> None:
        assert resolve_system("127.0.0.1", 443) == ["127.0.0.1"]

    def test_the_guard_over_the_system_resolver_allows_localhost_only_in_local_mode(self) -> None:
        destination = check_url("http://localhost:8123/hook", resolve_system, local_only=True)

        assert destination.address in {"127.0.0.1", "::1"}
        with pytest.raises(EgressRefusedError) as raised:
            check_url("https://localhost:8443/hook", resolve_system)
        assert raised.value.address_class == "loopback"
