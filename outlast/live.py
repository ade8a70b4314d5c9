"""Live job updates over the WebSocket a ticket opens (DESIGN.md, "Live updates: WebSocket push").

`open_live` takes a single-use ticket (POST /v1/realtime/tickets) and connects to the URL it
comes with; `LiveUpdates.next_update` hands out the status documents the API pushes. The socket
is only the fast path: every failure is a `LiveUpdatesError`, on which callers fall back to
polling, and a caller re-reads the job with GET whenever it needs the truth.

The client pings (`{"action": "ping"}`) after 5 quiet minutes (API Gateway closes a connection
idle for 10) and a caller takes a new ticket before the 2-hour limit (`due_for_renewal`).
"""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple, Self

from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI, WebSocketException
from websockets.sync.client import ClientConnection, connect

from outlast.api.http import (
    ApiError,
    HttpApi,
    JsonObject,
    TransportError,
    UnexpectedAnswerError,
    parse_document,
)
from outlast.api.models import StatusDocument

PING_INTERVAL_SECONDS = 300.0
OPEN_TIMEOUT_SECONDS = 10.0
# API Gateway ends a connection after 2 hours; reconnect with a fresh ticket a little before.
RENEW_AFTER_SECONDS = 110 * 60.0


class LiveUpdatesError(Exception):
    """The socket could not be opened or was lost; polling still works."""


class Update(NamedTuple):
    """One pushed status document: as sent, and as the contract's model."""

    body: JsonObject
    document: StatusDocument


class LiveUpdates:
    """One open WebSocket connection of the caller."""

    def __init__(self, connection: ClientConnection) -> None:
        self._connection = connection
        self._opened = time.monotonic()
        self._last_sent = self._opened

    @classmethod
    def open(cls, url: str, open_timeout: float = OPEN_TIMEOUT_SECONDS) -> Self:
        """Connect to a ticket's URL (a refused handshake, a bad URL or no answer: LiveUpdatesError)."""
        try:
            connection = connect(
                url,
                open_timeout=open_timeout,
                ping_interval=None,  # the API's idle limit counts messages: the client pings itself
                compression=None,
                max_size=128 * 1024,
                legacy=True,  # the connection itself, closed by LiveUpdates.close
            )
        except InvalidStatus as error:
            raise LiveUpdatesError(
                f"the WebSocket refused the ticket (HTTP {error.response.status_code})"
            ) from None
        except (InvalidURI, InvalidHandshake, WebSocketException, OSError, TimeoutError) as error:
            raise LiveUpdatesError(f"no WebSocket connection ({type(error).__name__})") from None
        return cls(connection)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def due_for_renewal(self) -> bool:
        """True near the 2-hour limit: take a new ticket and reconnect."""
        return time.monotonic() - self._opened >= RENEW_AFTER_SECONDS

    def next_update(self, timeout: float) -> Update | None:
        """The next pushed status document within `timeout` seconds, else None (pongs are skipped)."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            pushed = self.next_message(deadline - time.monotonic())
            if pushed is None or isinstance(pushed, Update):
                return pushed

    def next_message(self, timeout: float) -> Pushed | None:
        """The next frame the API sent within `timeout` seconds that means something to a follower
        (a job update, an output event, a follow's answer or error), else None (pongs are skipped)."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            self._ping_if_quiet()
            left = deadline - time.monotonic()
            try:
                frame = self._connection.recv(timeout=max(0.0, min(left, PING_INTERVAL_SECONDS)))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    return None
                continue
            except (WebSocketException, OSError) as error:
                raise LiveUpdatesError(f"the WebSocket closed ({type(error).__name__})") from None
            pushed = pushed_message(frame)
            if pushed is not None:
                return pushed

    def follow(self, job_id: str, after: tuple[int, int] = (0, 0)) -> None:
        """Follow a job's streamed output after (attempt, seq): the API replays what follows it, then
        pushes new events (`{"type": "following"}` once the replay is sent)."""
        attempt, seq = after
        self._send({"action": "follow", "jobId": job_id, "after": {"attempt": attempt, "seq": seq}})

    def unfollow(self, job_id: str) -> None:
        """Stop following a job's output."""
        self._send({"action": "unfollow", "jobId": job_id})

    def _send(self, message: JsonObject) -> None:
        try:
            self._connection.send(json.dumps(message))
        except (WebSocketException, OSError) as error:
            raise LiveUpdatesError(f"the WebSocket closed ({type(error).__name__})") from None
        self._last_sent = time.monotonic()

    def ping(self) -> None:
        """Send `{"action": "ping"}` (the API answers with `{"type": "pong"}`)."""
        self._send({"action": "ping"})

    def _ping_if_quiet(self) -> None:
        if time.monotonic() - self._last_sent >= PING_INTERVAL_SECONDS:
            self.ping()

    def close(self) -> None:
        """Close the connection (the API forgets it at $disconnect)."""
        try:
            self._connection.close()
        except (WebSocketException, OSError):
            return


class OutputPush(NamedTuple):
    """One pushed output event of a followed job."""

    job_id: str
    attempt: int
    seq: int
    text: str


class FollowAnswer(NamedTuple):
    """The answer to a follow or unfollow: `following`, `unfollowed` or `error` (with its code)."""

    kind: str
    job_id: str | None
    code: str | None = None


Pushed = Update | OutputPush | FollowAnswer


def pushed_message(frame: str | bytes) -> Pushed | None:
    """What a frame means to a follower; None for anything else (a pong, a frame we cannot read)."""
    update = job_update(frame)
    if update is not None:
        return update
    try:
        message: Any = json.loads(frame)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict):
        return None
    if message.get("type") == "output":
        return _output_push(message)
    if message.get("type") in {"following", "unfollowed", "error"}:
        job_id, code = message.get("jobId"), message.get("code")
        return FollowAnswer(
            str(message["type"]),
            job_id if isinstance(job_id, str) else None,
            code if isinstance(code, str) else None,
        )
    return None


def _output_push(message: dict[str, Any]) -> OutputPush | None:
    job_id, attempt, seq, text = (message.get(key) for key in ("jobId", "attempt", "seq", "text"))
    if not (isinstance(job_id, str) and isinstance(text, str) and _count(attempt) and _count(seq)):
        return None
    return OutputPush(job_id, int(attempt), int(seq), text)  # type: ignore[arg-type]


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def job_update(frame: str | bytes) -> Update | None:
    """A `{"type": "job", "job": <status document>}` frame's update; None for anything else."""
    try:
        message: Any = json.loads(frame)
    except (ValueError, RecursionError):
        return None
    if (
        not isinstance(message, dict)
        or message.get("type") != "job"
        or not isinstance(message.get("job"), dict)
    ):
        return None
    try:
        return Update(message["job"], parse_document(StatusDocument, message["job"]))
    except UnexpectedAnswerError:
        return None  # the socket is only the fast path: a frame we cannot read is skipped


def open_live(client: HttpApi) -> LiveUpdates:
    """Take a ticket and connect with it; LiveUpdatesError when either fails (the caller polls)."""
    try:
        ticket = client.create_ticket()
    except ApiError as error:
        raise LiveUpdatesError(f"no ticket (HTTP {error.status})") from None
    except (TransportError, UnexpectedAnswerError) as error:
        raise LiveUpdatesError(f"no ticket ({error})") from None
    return LiveUpdates.open(ticket.document.url)
