"""An OpenAI-compatible model server of the project's own, for tests and local mode: the HTTP layer.

It speaks the Chat Completions wire format, so the real `openai` SDK runs over a real socket
(point OPENAI_BASE_URL at `ModelServer.url`). What it answers is the fake model's
(outlast.local.fake_model: the answers, the directives that inject faults, the call log); this
module only reads requests, asks the fake model, and writes its answers, acting out what a pure
model cannot: the delay, the stall of a timeout (no answer until the client gives up, the server
stops, or 60 s pass), and a streamed answer (`stream: true`: chunked server-sent events, paced by
`[[pace:N]]`, broken off after a few tokens by `[[fault:stream_cut*N]]`; a client that closes the
stream before its end is logged `closed_early`, with the tokens sent so far as what was served).

Routes: `POST /v1/chat/completions`, `GET /v1/models`, and the Batch API (`POST /v1/files`,
`GET /v1/files/{id}[/content]`, `POST /v1/batches`, `GET /v1/batches[?limit=&after=]`,
`GET /v1/batches/{id}`, `POST /v1/batches/{id}/cancel`: outlast.local.fake_model.batches; a batch completes
`--batch-seconds` after its creation), all wanting a bearer key, any key. Not
part of OpenAI, for tests and benchmarks: `GET /_calls` lists every finished chat call in the
order they finished (outlast.local.fake_model.calls describes an entry; a call is logged just
after its answer is sent, so a reader waits for `ModelServer.in_flight` to be 0, or polls, as
tests/support/local_stack.py does), `POST /_calls/reset`
clears that list only, `POST /_faults/reset` clears the fault counters only. A step of a planned
job sends the same messages on every attempt, so calls are counted per step by `requestHash`
(the hash of the messages the planner renders for the step, `messages_hash`), or per map step
by `part`. `GET /_tally` is the server's own account of the tokens it served, per `requestHash`
(`calls`, `inputTokens`, `outputTokens`: every completion sent, read by its caller or not). No
job id reaches a provider, so a client that knows which hashes are whose (chaos: each job's own
text) totals them per job.

`python -m outlast.local.model_server [--port N] [--context-tokens N] [--batch-seconds S] [--verbose]`
runs it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import email.parser
import email.policy
import json
import re
import select
import socket
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from outlast.local.fake_model.batches import DEFAULT_BATCH_SECONDS, DEFAULT_LIST_LIMIT, BatchDesk
from outlast.local.fake_model.calls import CallOutcome
from outlast.local.fake_model.model import DEFAULT_CONTEXT_TOKENS, FakeModel, Turn
from outlast.local.fake_model.replies import Reply, error_reply, not_found, unauthorized
from outlast.local.fake_model.requests import authorized
from outlast.local.fake_model.streaming import CUT_AFTER_PIECES
from outlast.local.http_handler import LocalRequestHandler
from outlast.local.stop_signals import StopSignals

MAX_BODY_BYTES = 8 * 1024 * 1024
STALL_LIMIT_SECONDS = 60.0
STALL_STEP_SECONDS = 0.05


class ServerState:
    """The fake model and what the handler threads share: live connections, the stop signal."""

    def __init__(
        self, model: FakeModel, *, verbose: bool, batch_seconds: float = DEFAULT_BATCH_SECONDS
    ) -> None:
        self.model = model
        self.batches = BatchDesk(lambda body: model.batch_call(body, time.time()), batch_seconds)
        self.verbose = verbose
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()

    def track(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)

    def close_connections(self) -> None:
        """Wake every handler blocked on a keep-alive read, so no thread outlives stop()."""
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the peer
                connection.shutdown(socket.SHUT_RDWR)


def _peer_closed(connection: socket.socket) -> bool:
    """True once the client hung up (a readable socket with nothing to read)."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


_BATCH_ITEM = re.compile(r"^/v1/batches/([A-Za-z0-9_-]+)(/cancel)?$")
_FILE_ITEM = re.compile(r"^/v1/files/([A-Za-z0-9_-]+)(/content)?$")


def _multipart_fields(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body's fields: name -> (filename, bytes)."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            fields[name] = (part.get_filename(), payload)
    return fields


# --- HTTP -----------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    # Handler threads must never keep the process (or stop()) waiting on a stalled request.
    daemon_threads = True

    def __init__(self, address: tuple[str, int], state: ServerState) -> None:
        self.state = state
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up mid-answer is routine here (timeouts are the point); stay quiet.
        if isinstance(sys.exc_info()[1], ConnectionError) and not self.state.verbose:
            return
        super().handle_error(request, client_address)


class _Handler(LocalRequestHandler):
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.state.track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.state.untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.state.verbose:  # http.server's access log, which the base silences
            BaseHTTPRequestHandler.log_message(self, format, *args)

    @property
    def _model(self) -> FakeModel:
        return self.server.state.model

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path.startswith(("/v1/files/", "/v1/batches/")):
            self._batch_get(path)
            return
        if path == "/v1/batches":
            self._send(self._batch_list(query))
            return
        routes: dict[str, Callable[[], Reply]] = {
            "/v1/models": lambda: self._model.models(self.headers.get("Authorization")),
            "/_calls": lambda: Reply(200, self._model.calls()),
            "/_tally": lambda: Reply(200, self._model.tally()),
        }
        self._send(routes.get(path, lambda: not_found(path))())

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        body = self._read_body()
        if body is None:
            return
        if path == "/v1/chat/completions":
            self._chat(body)
            return
        if path.startswith(("/v1/files", "/v1/batches")):
            self._send(self._batch_post(path, body))
            return
        routes: dict[str, Callable[[], Reply]] = {
            "/_faults/reset": lambda: self._reset(self._model.reset_faults, "faults"),
            "/_calls/reset": lambda: self._reset(self._model.reset_calls, "calls"),
        }
        self._send(routes.get(path, lambda: not_found(path))())

    def _batch_get(self, path: str) -> None:
        """`GET /v1/files/{id}[/content]`, `GET /v1/batches/{id}`."""
        desk = self.server.state.batches
        if not authorized(self.headers.get("Authorization")):
            self._send(unauthorized())
            return
        file_item, batch_item = _FILE_ITEM.match(path), _BATCH_ITEM.match(path)
        if file_item and file_item.group(2):
            content = desk.content(file_item.group(1))
            if content is None:
                self._send(error_reply(404, "No such file.", "invalid_request_error", None))
                return
            self._send_bytes(content)
        elif file_item:
            self._send(desk.file(file_item.group(1)))
        elif batch_item and not batch_item.group(2):
            self._send(desk.retrieve(batch_item.group(1), time.time()))
        else:
            self._send(not_found(path))

    def _batch_list(self, query: str) -> Reply:
        """`GET /v1/batches?limit=N&after=ID`."""
        if not authorized(self.headers.get("Authorization")):
            return unauthorized()
        params = urllib.parse.parse_qs(query)
        limit = (params.get("limit") or [str(DEFAULT_LIST_LIMIT)])[0]
        if not limit.isdigit():
            return error_reply(400, "limit must be an integer.", "invalid_request_error", "limit")
        after = params.get("after")
        return self.server.state.batches.list_batches(int(limit), after[0] if after else None)

    def _batch_post(self, path: str, body: bytes) -> Reply:
        """`POST /v1/files` (multipart: purpose, file), `POST /v1/batches`, `.../{id}/cancel`."""
        desk = self.server.state.batches
        if not authorized(self.headers.get("Authorization")):
            return unauthorized()
        batch_item = _BATCH_ITEM.match(path)
        if path == "/v1/files":
            fields = _multipart_fields(self.headers.get("Content-Type", ""), body)
            filename, content = fields.get("file", (None, b""))
            purpose = fields.get("purpose", (None, b""))[1].decode()
            return desk.upload(filename or "upload.jsonl", purpose, content, time.time())
        if path == "/v1/batches":
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                request = None
            if not isinstance(request, dict):
                return error_reply(400, "The body must be a JSON object.", "invalid_request_error", None)
            return desk.create(request, time.time())
        if batch_item and batch_item.group(2):
            return desk.cancel(batch_item.group(1), time.time())
        return not_found(path)

    def _send_bytes(self, content: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    @staticmethod
    def _reset(reset: Callable[[], None], what: str) -> Reply:
        reset()
        return Reply(200, {"reset": what})

    def _read_body(self) -> bytes | None:
        """The request body, or None after answering 413 (the body is left unread)."""
        declared = self.headers.get("Content-Length") or "0"
        length = int(declared) if declared.isdigit() else -1
        if length < 0:
            # Reading a body of unknown length would wait for the client to hang up.
            self.close_connection = True
            self._send(error_reply(400, "A valid Content-Length is required.", "invalid_request_error", None))
            return None
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the unread body makes the connection unusable
            self._send(error_reply(413, "The request body is too large.", "invalid_request_error", None))
            return None
        return self.rfile.read(length)

    def _chat(self, body: bytes) -> None:
        self._model.begin_call()
        started = time.time()
        result = CallOutcome("error", 500)
        try:
            result = self._serve_chat(body)
        finally:
            self._model.end_call(result, started, time.time())

    def _serve_chat(self, body: bytes) -> CallOutcome:
        turn = self._model.take(body, self.headers.get("Authorization"))
        if turn.delay_seconds and self.server.state.stopping.wait(turn.delay_seconds):
            self.close_connection = True
            return turn.unanswered("shutdown")
        if turn.stalls:
            self._stall()
            return turn.unanswered("timeout")
        if turn.streams:
            return self._stream(turn)
        reply, outcome = turn.reply()
        if outcome.usage is None:  # an error answer: nothing was served
            return self._send(reply, outcome)
        try:
            return self._send(reply, outcome)
        except OSError:
            # The caller left before the answer (it gave up, or its process died).
            self.close_connection = True
            return turn.abandoned(outcome)

    def _stream(self, turn: Turn) -> CallOutcome:
        """Server-sent events, chunked: paced by `[[pace:N]]`, cut after a few pieces for
        `[[fault:stream_cut*N]]` (the connection breaks without the last chunk), and `closed_early`
        when the client hangs up first (a cancel: the provider stops generating)."""
        answer = turn.streamed_answer()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex}")
        self.end_headers()
        pause = 1 / turn.pace if turn.pace else 0.0
        sent: list[str] = []
        try:
            for index, (data, piece) in enumerate(answer.events()):
                if turn.cuts and index == CUT_AFTER_PIECES:
                    self._break_off()
                    return turn.streamed("stream_cut", answer, "".join(sent))
                if index and pause and self.server.state.stopping.wait(pause):
                    self._break_off()
                    return turn.streamed("shutdown", answer, "".join(sent))
                if _peer_closed(self.connection):
                    raise ConnectionResetError
                self._write_chunk(data)
                sent.append(piece)
            self._write_chunk(answer.ending())
            self._write_chunk(b"")  # the last chunk: the body is whole
        except OSError:
            self.close_connection = True
            return turn.streamed("closed_early", answer, "".join(sent))
        return turn.streamed("ok", answer, "".join(sent))

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _break_off(self) -> None:
        """Close the connection mid-body: the client sees a response cut short."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _stall(self) -> None:
        """Answer nothing until the client gives up, the server stops, or the bound passes."""
        deadline = time.monotonic() + STALL_LIMIT_SECONDS
        while time.monotonic() < deadline:
            if self.server.state.stopping.wait(STALL_STEP_SECONDS) or _peer_closed(self.connection):
                break
        self.close_connection = True  # never answer a stalled request late

    def _send(self, reply: Reply, result: CallOutcome | None = None) -> CallOutcome:
        payload = json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex}")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        return result or CallOutcome("ok", reply.status)


# --- the server -----------------------------------------------------------------------------


class ModelServer:
    """The model server on a background daemon thread; `url` is what OPENAI_BASE_URL takes."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        verbose: bool = False,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        batch_seconds: float = DEFAULT_BATCH_SECONDS,
    ) -> None:
        self._state = ServerState(FakeModel(context_tokens), verbose=verbose, batch_seconds=batch_seconds)
        self._httpd = _HTTPServer((host, port), self._state)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL of the OpenAI API, ending in /v1."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def running(self) -> bool:
        """True while the serving thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def in_flight(self) -> int:
        """Chat calls started and not yet finished (stalls and delays included)."""
        return self._state.model.in_flight

    def start(self) -> ModelServer:
        """Serve on a daemon thread."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1}, name="model-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop promptly: wake stalled and delayed calls, drop connections, release the port."""
        self._state.stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()  # returns once serve_forever has left its loop
            self._thread.join(timeout=5)
        self._state.close_connections()
        self._httpd.server_close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m outlast.local.model_server`: serve until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(description="outlast's local OpenAI-compatible model server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8400)
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    parser.add_argument(
        "--context-tokens",
        type=_positive_int,
        default=DEFAULT_CONTEXT_TOKENS,
        help=f"the model's context in tokens estimated as ceil(bytes / 4) (default {DEFAULT_CONTEXT_TOKENS})",
    )
    parser.add_argument(
        "--batch-seconds",
        type=float,
        default=DEFAULT_BATCH_SECONDS,
        help=f"a batch completes this long after its creation (default {DEFAULT_BATCH_SECONDS:g})",
    )
    args = parser.parse_args(argv)

    stop = StopSignals().install()
    server = ModelServer(
        args.host,
        args.port,
        verbose=args.verbose,
        context_tokens=args.context_tokens,
        batch_seconds=args.batch_seconds,
    ).start()
    sys.stdout.write(f"model server: {server.url}\n")
    sys.stdout.flush()
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
