"""A small typed client for the outlast HTTP API, on the standard library only.

The command line talks to a local stack or a deployed API with this client. It keeps to
`urllib.request` so the CLI needs nothing beyond the project's own dependencies, and it does
no printing, sleeping or retrying: those are the caller's policy (see `outlast.commands.jobs`).

Failures come out as three kinds of exception, because a caller acts differently on each:
- `ApiError`: the API answered 3xx/4xx/5xx (a problem+json body, or API Gateway's own plain
  `{"message": ...}` for its authorizer 401, unknown-route 404 and throttling 429);
- `ApiUnreachableError`: no connection was made, so nothing reached the API;
- `ConnectionLostError`: the request may have reached the API but no whole answer came back
  (reset, dropped, timed out), so only an idempotent request may simply be sent again.
"""

from __future__ import annotations

import errno
import http.client
import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, cast

DEFAULT_TIMEOUT_SECONDS = 30.0
USER_AGENT = "outlast-cli/0.1"
TERMINAL_STATUSES = frozenset({"Succeeded", "Failed", "Canceled"})
STATUSES = ("Pending", "Running", "Succeeded", "Failed", "CancellationRequested", "Canceled")
OPERATIONS = ("summarize", "analyze", "classify")
# Connection errors that mean the request never left this machine (nothing to be unsure about).
_NOT_CONNECTED_ERRNOS = frozenset({errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH})
# More than this API ever asks for; a longer Retry-After is a broken header, not a plan.
MAX_RETRY_AFTER_SECONDS = 3600


class ErrorDocument(TypedDict):
    """Why a job failed: a stable code and a message safe to show."""

    code: str
    message: str


class UsageDocument(TypedDict):
    """Tokens the model reported."""

    inputTokens: int
    outputTokens: int


class ProgressDocument(TypedDict):
    """How far a job is: steps checkpointed of the steps its plan has."""

    completedSteps: int
    totalSteps: int


class StatusDocument(TypedDict):
    """Where a job stands (the body of submit, status and cancel answers)."""

    jobId: str
    status: str
    operation: str
    createdAt: str
    updatedAt: str
    expiresAt: str
    attempts: int
    revision: NotRequired[int]  # grows with every write of the job (absent from older APIs)
    crashes: NotRequired[int]
    progress: NotRequired[ProgressDocument]  # steps checkpointed of the steps planned
    cancelRequestedAt: str | None
    resultUrl: str | None
    error: ErrorDocument | None
    usage: UsageDocument | None
    reservedTokens: NotRequired[
        int | None
    ]  # held of the tenant's budget until settled (absent from older APIs)


class BudgetDocument(TypedDict):
    """The caller's tenant's monthly token budget (GET /v1/budget)."""

    period: str
    limitTokens: int | None
    usedTokens: int
    reservedTokens: int
    remainingTokens: int | None
    resetsAt: str


class TicketDocument(TypedDict):
    """A single-use ticket for live updates and the WebSocket URL that carries it."""

    ticket: str
    url: str
    expiresAt: str


class ResultDocument(TypedDict):
    """The output of a Succeeded job."""

    jobId: str
    operation: str
    output: str
    usage: UsageDocument | None


class JobPage(TypedDict):
    """One page of the caller's jobs, newest first."""

    items: list[StatusDocument]
    nextCursor: str | None


class JobOptions(TypedDict, total=False):
    """Submit options; the server's defaults apply to whatever is left out."""

    model: str
    maxOutputTokens: int
    labels: list[str]


class SubmitRequest(TypedDict):
    """The body of POST /v1/jobs."""

    operation: str
    input: dict[str, str]
    options: NotRequired[JobOptions]


@dataclass(frozen=True)
class Answer[DocumentT]:
    """A successful answer: its status code, headers (lower-case names) and JSON body."""

    status: int
    headers: Mapping[str, str]
    document: DocumentT

    @property
    def retry_after(self) -> int | None:
        """The server's Retry-After in whole seconds, when it sent a usable one."""
        return parse_retry_after(self.headers.get("retry-after"))

    @property
    def replayed(self) -> bool:
        """True when a submit answer replays an earlier submit with the same idempotency key."""
        return self.headers.get("idempotent-replayed", "").strip().lower() == "true"

    @property
    def location(self) -> str | None:
        """The Location header (root-relative in this API)."""
        return self.headers.get("location")


def parse_retry_after(value: str | None) -> int | None:
    """Delta-seconds from a Retry-After header, 1 s to an hour; None unless digits (never a date here)."""
    text = (value or "").strip()
    # isdigit() alone takes '²' and other digits that int() refuses.
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    # Huge values are broken headers: cap them before int() (which refuses 4,300+ digits) or sleep().
    if len(digits) > len(str(MAX_RETRY_AFTER_SECONDS)):
        return MAX_RETRY_AFTER_SECONDS
    # Never faster than once a second, even if a server said 0.
    return min(max(1, int(digits)), MAX_RETRY_AFTER_SECONDS)


def is_bearer_token(token: str) -> bool:
    """True when an Authorization header can carry the token: visible ASCII, no spaces or line breaks."""
    return bool(token) and all("!" <= character <= "~" for character in token)


def check_api_url(api_url: str) -> None:
    """Raise ValueError, with a message for the user, unless `api_url` is an http(s) base URL we can reach."""
    parsed = urllib.parse.urlsplit(api_url)
    # Only http(s): urllib would happily open file:// and friends. A query or fragment would end up
    # in the middle of every request's path.
    if parsed.scheme not in {"http", "https"} or not parsed.hostname or parsed.query or parsed.fragment:
        raise ValueError(f"API URL must be http(s)://HOST[:PORT][/PREFIX], got {api_url!r}")
    if parsed.username is not None or parsed.password is not None:
        # Not echoed: the point is that it holds a secret.
        raise ValueError("API URL must not hold a user name or password")
    try:
        parsed.port  # noqa: B018 - the property raises on a port that is not 0-65535
        parsed.hostname.encode("idna")
    except ValueError:  # UnicodeError (an empty or 64+ character label) is a ValueError
        raise ValueError(f"API URL has a bad host or port: {api_url!r}") from None
    # http.client refuses these in a request; caught here they are a usage error, not a retry.
    if any(character <= " " or character == "\x7f" for character in api_url) or not parsed.path.isascii():
        raise ValueError(f"API URL must not hold spaces, control or non-ASCII path characters: {api_url!r}")


class ApiError(Exception):
    """The API answered with an error status; the body is a problem document or API Gateway's message."""

    def __init__(self, status: int, headers: Mapping[str, str], body: Any, text: str) -> None:
        self.status = status
        self.headers = headers
        self.body = body if isinstance(body, dict) else {}
        self.text = text
        super().__init__(f"HTTP {status}")

    @property
    def is_problem(self) -> bool:
        """True for an RFC 9457 problem from the functions (not API Gateway's own answer)."""
        return "code" in self.body and "title" in self.body

    @property
    def code(self) -> str | None:
        """The problem's stable code (`rate_limited`, `job_not_found`, ...)."""
        value = self.body.get("code")
        return value if isinstance(value, str) else None

    @property
    def retry_after(self) -> int | None:
        """Retry-After of a 429 or 503, when the server sent one."""
        return parse_retry_after(self.headers.get("retry-after"))

    @property
    def correlation_id(self) -> str | None:
        """The problem's correlationId, else API Gateway's request id header."""
        value = self.body.get("correlationId") or self.headers.get("apigw-requestid")
        return value if isinstance(value, str) else None


class TransportError(Exception):
    """No whole HTTP answer came back from the API (`url` is the API's base URL)."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"{url}: {reason}")


class ApiUnreachableError(TransportError):
    """No connection could be made: the request was never sent."""


class ConnectionLostError(TransportError):
    """The connection failed after the request may have been sent (reset, dropped, timed out)."""


class UnexpectedAnswerError(Exception):
    """A success status whose body is not the document the contract promises."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # The API never redirects; following one would send the bearer token to wherever it points.
    def redirect_request(self, *_: Any, **__: Any) -> None:
        return None


def _reason(error: BaseException) -> str:
    detail = str(error) or type(error).__name__
    return detail.removeprefix("<urlopen error ").removesuffix(">")


def classify_connection_error(url: str, error: BaseException) -> TransportError:
    """Sort a connection failure into 'never sent' and 'maybe sent'."""
    cause = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(cause, socket.gaierror):
        return ApiUnreachableError(url, f"unknown host: {cause.strerror or cause}")
    if isinstance(cause, http.client.InvalidURL):
        # Refused before connecting (a port or path http.client cannot use): nothing was sent.
        return ApiUnreachableError(url, f"invalid URL: {cause}")
    if isinstance(cause, ssl.SSLCertVerificationError):
        # The handshake failed, so no request was sent, and trying again will not change the certificate.
        return ApiUnreachableError(url, f"TLS certificate not trusted: {cause.verify_message or cause}")
    if isinstance(cause, OSError) and cause.errno in _NOT_CONNECTED_ERRNOS:
        return ApiUnreachableError(url, cause.strerror or _reason(cause))
    if isinstance(cause, TimeoutError):
        return ConnectionLostError(url, "timed out")
    return ConnectionLostError(url, _reason(cause) if isinstance(cause, BaseException) else str(cause))


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None


def _require(document: Any, fields: tuple[str, ...], what: str) -> dict[str, Any]:
    if not isinstance(document, dict) or not all(name in document for name in fields):
        raise UnexpectedAnswerError(f"the API's answer is not a {what}")
    return document


class OutlastClient:
    """The outlast API's six calls, with a bearer token and a timeout on each request."""

    def __init__(self, api_url: str, token: str, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        check_api_url(api_url)
        if not is_bearer_token(token):
            # Never quote it: http.client's own error would print the whole header.
            raise ValueError("the token must be visible ASCII with no spaces or line breaks")
        self.api_url = api_url.rstrip("/")
        self._token = token
        self._timeout = timeout_seconds
        self._opener = urllib.request.build_opener(_NoRedirects)

    def url_for(self, reference: str) -> str:
        """An absolute URL for a path of the API or a root-relative Location it sent."""
        return urllib.parse.urljoin(self.api_url + "/", reference)

    def submit(self, request: SubmitRequest, idempotency_key: str) -> Answer[StatusDocument]:
        """POST /v1/jobs; safe to repeat with the same key (the API replays the same job)."""
        return _status(self._call("POST", "/v1/jobs", request, {"Idempotency-Key": idempotency_key}))

    def get_job(self, job_id: str) -> Answer[StatusDocument]:
        """GET /v1/jobs/{id}: the status document."""
        return _status(self._call("GET", f"/v1/jobs/{_segment(job_id)}"))

    def get_result(self, job_id: str) -> Answer[ResultDocument]:
        """GET /v1/jobs/{id}/result: the output of a Succeeded job."""
        answer = self._call("GET", f"/v1/jobs/{_segment(job_id)}/result")
        document = _require(answer.document, ("jobId", "output"), "result document")
        return Answer(answer.status, answer.headers, cast(ResultDocument, document))

    def cancel(self, job_id: str) -> Answer[StatusDocument]:
        """POST /v1/jobs/{id}/cancellation: 200 Canceled, 202 CancellationRequested."""
        return _status(self._call("POST", f"/v1/jobs/{_segment(job_id)}/cancellation"))

    def create_ticket(self) -> Answer[TicketDocument]:
        """POST /v1/realtime/tickets: a 60-second, single-use ticket and the WebSocket URL to open."""
        answer = self._call("POST", "/v1/realtime/tickets")
        document = _require(answer.document, ("ticket", "url", "expiresAt"), "ticket")
        if not str(document["url"]).startswith(("ws://", "wss://")):
            raise UnexpectedAnswerError("the API's ticket holds no WebSocket URL")
        return Answer(answer.status, answer.headers, cast(TicketDocument, document))

    def get_budget(self) -> Answer[BudgetDocument]:
        """GET /v1/budget: the caller's tenant's token budget this month."""
        answer = self._call("GET", "/v1/budget")
        fields = ("period", "limitTokens", "usedTokens", "reservedTokens", "remainingTokens", "resetsAt")
        document = _require(answer.document, fields, "budget document")
        return Answer(answer.status, answer.headers, cast(BudgetDocument, document))

    def list_jobs(self, status: str | None, limit: int | None, cursor: str | None) -> Answer[JobPage]:
        """GET /v1/jobs: one page, newest first (it may be short while nextCursor is set)."""
        query = {
            name: value
            for name, value in (("status", status), ("limit", limit), ("cursor", cursor))
            if value is not None
        }
        path = "/v1/jobs" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        answer = self._call("GET", path)
        document = _require(answer.document, ("items", "nextCursor"), "job page")
        if not isinstance(document["items"], list):
            raise UnexpectedAnswerError("the API's answer is not a job page")
        return Answer(answer.status, answer.headers, cast(JobPage, document))

    def _call(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> Answer[Any]:
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked in __init__
            self.api_url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self._token}",
                "Accept": "application/json, application/problem+json",
                "User-Agent": USER_AGENT,
                **({"Content-Type": "application/json"} if body is not None else {}),
                **(headers or {}),
            },
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                raw = response.read()
                return Answer(response.status, _lower(response.headers.items()), _decode(raw))
        except urllib.error.HTTPError as error:
            raw = _read_error_body(error)
            raise ApiError(
                error.code, _lower(error.headers.items()), _decode(raw), raw.decode(errors="replace")
            ) from None
        except (OSError, http.client.HTTPException) as error:
            # OSError covers URLError, resets and timeouts; HTTPException a garbled or cut answer.
            raise classify_connection_error(self.api_url, error) from None
        except ValueError:
            # http.client refuses a header or URL it cannot encode before sending anything, and its
            # message quotes the value, which may be the token: keep the message, drop the value.
            raise ApiUnreachableError(
                self.api_url, "the request holds characters HTTP cannot carry"
            ) from None


def _status(answer: Answer[Any]) -> Answer[StatusDocument]:
    document = _require(answer.document, ("jobId", "status"), "status document")
    return Answer(answer.status, answer.headers, cast(StatusDocument, document))


def _segment(value: str) -> str:
    # A job id is a UUID, but whatever the user typed must stay one path segment.
    return urllib.parse.quote(value, safe="")


def _lower(items: Any) -> dict[str, str]:
    return {str(name).lower(): str(value) for name, value in items}


def _read_error_body(error: urllib.error.HTTPError) -> bytes:
    try:
        return error.read()
    except (OSError, http.client.HTTPException):
        return b""
