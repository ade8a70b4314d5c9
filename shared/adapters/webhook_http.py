"""WebhookPoster over the standard library (`http.client`, `ssl`), and the system resolver.

Why not urllib3 or requests: the attempt must go to the one address the egress guard
checked, with the URL's host as SNI, in the Host header and in certificate verification,
and end by one deadline. `http.client` has nothing to switch off (no pool, no retries, no
redirects, no proxy support, so no environment proxies), and the pinned connection is one
overridden `connect()`. urllib3 could pin too (`server_hostname`, `assert_hostname`), but
its total timeout still bounds each socket read on its own, like `http.client`'s: a
receiver that trickles one byte at a time would hold an attempt for ever. Here every send
and receive gets only the time left until the attempt's deadline. And urllib3 reaches the
functions only through the Lambda runtime's boto3, at a version the project does not pick.
"""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from shared.ports import PostResult, TransportFailure
from shared.webhooks.egress import HTTP_PORT, HTTPS_PORT

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

    from shared.webhooks.egress import Destination

DEFAULT_TIMEOUT_SECONDS = 10.0
USER_AGENT = "outlast-webhooks/1"
CONTENT_TYPE = "application/json"
# Headers the adapter writes itself; a caller's copies are dropped.
_OWN_HEADERS = frozenset({"host", "content-type", "content-length", "user-agent"})
_SEND_CHUNK = 16 * 1024


def resolve_system(host: str, port: int) -> list[str]:
    """The egress guard's Resolver over getaddrinfo: every TCP address of `host`, in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class HttpWebhookPoster:
    """POSTs webhook bodies with http.client: pinned address, no redirects, no proxies.

    `tls_context` verifies certificates (in Lambda, `ssl.create_default_context()` with the
    system store; tests pass one that trusts their own CA). `timeout_seconds` bounds the
    whole attempt: connect, TLS handshake, sending and reading the status and headers.
    The response body is never read.
    """

    def __init__(self, tls_context: ssl.SSLContext, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        self._tls_context = tls_context
        self._timeout = timeout_seconds

    def post(self, destination: Destination, body: bytes, headers: Mapping[str, str]) -> PostResult:
        """Make exactly one attempt; transport errors come back as a PostResult, never raised."""
        started = time.monotonic()
        connection = _PinnedConnection(
            destination, started + self._timeout, self._tls_context if destination.tls else None
        )
        sent = {name: value for name, value in headers.items() if name.lower() not in _OWN_HEADERS}
        sent |= {"Content-Type": CONTENT_TYPE, "User-Agent": USER_AGENT}
        status: int | None = None
        retry_after: str | None = None
        failure: TransportFailure | None = None
        try:
            connection.request("POST", destination.target, body=body, headers=sent)
            response = connection.getresponse()
            status, retry_after = response.status, response.getheader("Retry-After")
        except TimeoutError:
            failure = TransportFailure.TIMEOUT
        except ssl.SSLError:
            failure = TransportFailure.TLS
        except http.client.HTTPException:
            failure = TransportFailure.PROTOCOL
        except OSError:
            failure = TransportFailure.CONNECTION
        finally:
            connection.close()
        latency_ms = round((time.monotonic() - started) * 1000)
        return PostResult(status=status, failure=failure, retry_after=retry_after, latency_ms=latency_ms)


class _PinnedConnection(http.client.HTTPConnection):
    """An HTTP(S) connection to the checked address that speaks to the URL's host."""

    def __init__(self, destination: Destination, deadline: float, tls_context: ssl.SSLContext | None) -> None:
        super().__init__(destination.host, destination.port)
        # The Host header leaves the port out when it is the scheme's default.
        self.default_port = HTTPS_PORT if destination.tls else HTTP_PORT
        self._address = destination.address
        self._deadline = deadline
        self._tls_context = tls_context

    def connect(self) -> None:
        """Connect to the pinned address (never the name), then TLS with SNI for the host."""
        raw = socket.create_connection((self._address, self.port), timeout=_time_left(self._deadline))
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls_context is not None:
                raw.settimeout(_time_left(self._deadline))
                raw = self._tls_context.wrap_socket(raw, server_hostname=self.host)
        except BaseException:
            raw.close()
            raise
        self.sock = _DeadlineSocket(raw, self._deadline)


class _DeadlineSocket:
    """The socket http.client sees: each send and receive gets only the time left to the deadline.

    http.client gives every socket operation the full timeout; this keeps one budget for all.
    """

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def sendall(self, data: ReadableBuffer) -> None:
        view = memoryview(data).cast("B")
        for start in range(0, len(view), _SEND_CHUNK):
            self._sock.settimeout(_time_left(self._deadline))
            self._sock.sendall(view[start : start + _SEND_CHUNK])

    def recv_into(self, buffer: WriteableBuffer) -> int:
        self._sock.settimeout(_time_left(self._deadline))
        return self._sock.recv_into(buffer)

    def makefile(self, _mode: str) -> io.BufferedReader:
        # http.client asks for "rb" only: it parses responses as bytes.
        return io.BufferedReader(_DeadlineReader(self))

    def close(self) -> None:
        self._sock.close()


class _DeadlineReader(io.RawIOBase):
    """A raw binary stream over a _DeadlineSocket, for http.client's response parser."""

    def __init__(self, sock: _DeadlineSocket) -> None:
        super().__init__()
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        return self._sock.recv_into(buffer)


def _time_left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the webhook attempt's deadline passed")
    return left
