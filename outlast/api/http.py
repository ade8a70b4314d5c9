"""The outlast HTTP API over `urllib.request`: one call per route, each answer checked against the
API's own documents (outlast.api.models, generated from docs/openapi.json).

Failures come out as three kinds of exception, because a caller acts differently on each:
- `ApiError`: the API answered 3xx/4xx/5xx (a problem+json body, or API Gateway's own plain
  `{"message": ...}` for its authorizer 401, unknown-route 404 and throttling 429);
- `ApiUnreachableError`: no connection was made, so nothing reached the API;
- `ConnectionLostError`: the request may have reached the API but no whole answer came back
  (reset, dropped, timed out), so only an idempotent request may simply be sent again.
An answer whose body is not the promised document is an `UnexpectedAnswerError`.

Nothing here prints, sleeps or retries: that is the caller's policy (outlast.retry).
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from outlast import __version__
from outlast.api.models import (
    BudgetDocument,
    CreatedDocument,
    DocumentPage,
    DocumentStatusDocument,
    JobPage,
    OutputPage,
    ResultDocument,
    StatusDocument,
    SubmitRequest,
    TicketDocument,
)

DEFAULT_TIMEOUT_SECONDS = 30.0
USER_AGENT = f"outlast-cli/{__version__}"
# The closed sets the documents name, read from the generated models (never restated here).
STATUSES: tuple[str, ...] = get_args(StatusDocument.model_fields["status"].annotation)
OPERATIONS: tuple[str, ...] = get_args(StatusDocument.model_fields["operation"].annotation)
TERMINAL_STATUSES = frozenset({"Succeeded", "Failed", "Canceled"})
# Connection errors that mean the request never left this machine (nothing to be unsure about).
_NOT_CONNECTED_ERRNOS = frozenset({errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH})
# More than this API ever asks for; a longer Retry-After is a broken header, not a plan.
MAX_RETRY_AFTER_SECONDS = 3600

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Answer[DocumentT]:
    """A successful answer: status, headers (lower-case names), the JSON body as sent, and that
    body as the document the contract promises."""

    status: int
    headers: Mapping[str, str]
    body: JsonObject
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
        self.body: JsonObject = body if isinstance(body, dict) else {}
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


def parse_document[ModelT: BaseModel](model: type[ModelT], body: Any) -> ModelT:
    """`body` as `model`; UnexpectedAnswerError when it is not one (the message names the document)."""
    try:
        return model.model_validate(body)
    except ValidationError:
        raise UnexpectedAnswerError(f"the API's answer is not a {_document_name(model)}") from None


def _document_name(model: type[BaseModel]) -> str:
    # StatusDocument -> "status document", JobPage -> "job page"
    name = model.__name__
    return "".join(f" {c.lower()}" if c.isupper() else c for c in name).strip()


TokenSource = Callable[[], str]


class HttpApi:
    """The outlast API's calls, with a bearer token (asked for at each request) and a timeout."""

    def __init__(
        self, api_url: str, token: str | TokenSource, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    ) -> None:
        check_api_url(api_url)
        if isinstance(token, str):
            _check_token(token)
        self.api_url = api_url.rstrip("/")
        self._token = token
        self._timeout = timeout_seconds
        self._opener = urllib.request.build_opener(_NoRedirects)

    def url_for(self, reference: str) -> str:
        """An absolute URL for a path of the API or a root-relative Location it sent."""
        return urllib.parse.urljoin(self.api_url + "/", reference)

    def submit(self, request: SubmitRequest | JsonObject, idempotency_key: str) -> Answer[StatusDocument]:
        """POST /v1/jobs; safe to repeat with the same key (the API replays the same job). A dict is
        sent as it is (tools that build bodies of their own)."""
        body = (
            request.model_dump(mode="json", by_alias=True, exclude_none=True)
            if isinstance(request, SubmitRequest)
            else request
        )
        answer = self._call("POST", "/v1/jobs", body, {"Idempotency-Key": idempotency_key})
        return _typed(answer, StatusDocument)

    def get_job(self, job_id: str) -> Answer[StatusDocument]:
        """GET /v1/jobs/{id}: the status document."""
        return _typed(self._call("GET", f"/v1/jobs/{_segment(job_id)}"), StatusDocument)

    def get_result(self, job_id: str) -> Answer[ResultDocument]:
        """GET /v1/jobs/{id}/result: the output of a Succeeded job."""
        return _typed(self._call("GET", f"/v1/jobs/{_segment(job_id)}/result"), ResultDocument)

    def get_output(
        self, job_id: str, after: str | None = None, limit: int | None = None
    ) -> Answer[OutputPage]:
        """GET /v1/jobs/{id}/output: a streaming job's events after the cursor `after` (ATTEMPT.SEQ)."""
        query = {name: value for name, value in (("after", after), ("limit", limit)) if value is not None}
        path = f"/v1/jobs/{_segment(job_id)}/output" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        return _typed(self._call("GET", path), OutputPage)

    def cancel(self, job_id: str) -> Answer[StatusDocument]:
        """POST /v1/jobs/{id}/cancellation: 200 Canceled, 202 CancellationRequested."""
        return _typed(self._call("POST", f"/v1/jobs/{_segment(job_id)}/cancellation"), StatusDocument)

    def create_ticket(self) -> Answer[TicketDocument]:
        """POST /v1/realtime/tickets: a 60-second, single-use ticket and the WebSocket URL to open."""
        answer = _typed(self._call("POST", "/v1/realtime/tickets"), TicketDocument)
        if not answer.document.url.startswith(("ws://", "wss://")):
            raise UnexpectedAnswerError("the API's ticket holds no WebSocket URL")
        return answer

    def get_budget(self) -> Answer[BudgetDocument]:
        """GET /v1/budget: the caller's tenant's token budget this month."""
        return _typed(self._call("GET", "/v1/budget"), BudgetDocument)

    def list_jobs(self, status: str | None, limit: int | None, cursor: str | None) -> Answer[JobPage]:
        """GET /v1/jobs: one page, newest first (it may be short while nextCursor is set)."""
        query = {
            name: value
            for name, value in (("status", status), ("limit", limit), ("cursor", cursor))
            if value is not None
        }
        path = "/v1/jobs" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        return _typed(self._call("GET", path), JobPage)

    def create_document(self, filename: str, content_type: str, size: int) -> Answer[CreatedDocument]:
        """POST /v1/documents: the document AwaitingUpload and the presigned POST that uploads it.
        Not idempotent: a retry makes another document (the first, never uploaded, expires)."""
        body = {"filename": filename, "contentType": content_type, "bytes": size}
        return _typed(self._call("POST", "/v1/documents", body), CreatedDocument)

    def get_document(self, document_id: str) -> Answer[DocumentStatusDocument]:
        """GET /v1/documents/{id}."""
        return _typed(self._call("GET", f"/v1/documents/{_segment(document_id)}"), DocumentStatusDocument)

    def list_documents(self, limit: int | None, cursor: str | None) -> Answer[DocumentPage]:
        """GET /v1/documents: one page, newest first."""
        query = {name: value for name, value in (("limit", limit), ("cursor", cursor)) if value is not None}
        path = "/v1/documents" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        return _typed(self._call("GET", path), DocumentPage)

    def delete_document(self, document_id: str) -> None:
        """DELETE /v1/documents/{id} (204; ApiError 409 document_in_use while a job reads it)."""
        self._call("DELETE", f"/v1/documents/{_segment(document_id)}")

    def _bearer(self) -> str:
        if isinstance(self._token, str):
            return self._token
        token = self._token()
        _check_token(token)
        return token

    def _call(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, dict[str, str], Any]:
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked in __init__
            self.api_url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self._bearer()}",
                "Accept": "application/json, application/problem+json",
                "User-Agent": USER_AGENT,
                **({"Content-Type": "application/json"} if body is not None else {}),
                **(headers or {}),
            },
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                raw = response.read()
                return response.status, _lower(response.headers.items()), _decode(raw)
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


def _check_token(token: str) -> None:
    if not is_bearer_token(token):
        # Never quote it: http.client's own error would print the whole header.
        raise ValueError("the token must be visible ASCII with no spaces or line breaks")


def _typed[ModelT: BaseModel](answer: tuple[int, dict[str, str], Any], model: type[ModelT]) -> Answer[ModelT]:
    status, headers, body = answer
    document = parse_document(model, body)
    return Answer(status, headers, body, document)


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
