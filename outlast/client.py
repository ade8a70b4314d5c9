"""outlast from Python: `from outlast.client import Client`.

    client = Client()  # $OUTLAST_TOKEN, else your `outlast login`; the API from the profile
    job = client.submit("summarize", text)
    done = client.wait(job.job_id)
    if done.status == "Succeeded":
        print(client.result(job.job_id).output)

    document = client.upload_document("report.pdf")  # Ready (or Rejected: document.error)
    job = client.submit("summarize", document_id=document.document_id)

    job = client.submit("analyze", text, stream=True)
    client.follow_output(job.job_id, on_text=lambda shown: print(shown))  # the text as it grows

Every call is retried as the command line retries (a lost connection, a 5xx, a 429 honouring
Retry-After), which is safe: reads are idempotent, and `submit` sends an idempotency key (one is
made for you; pass your own to make a retry across processes safe). Documents are the API's own
models, generated from docs/openapi.json (outlast.api.models). Failures are `ApiError` (the API
answered 4xx/5xx, `.code` is the problem's stable code), `TransportError` (no whole answer) and
`UnexpectedAnswerError`; `wait` raises `WaitTimeout` when its timeout passes first.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from outlast.api.http import (
    STATUSES,
    ApiError,
    ApiUnreachableError,
    ConnectionLostError,
    HttpApi,
    TransportError,
    UnexpectedAnswerError,
)
from outlast.api.models import (
    BudgetDocument,
    DocumentStatusDocument,
    JobInputBody,
    JobOptions,
    ResultDocument,
    StatusDocument,
    SubmitRequest,
)
from outlast.auth.tokens import NotSignedInError
from outlast.connection import resolve
from outlast.document_upload import upload_document, wait_settled
from outlast.follow import Followed, Follower, Quiet, TimeUpError
from outlast.output_follow import OutputFollower
from outlast.reassembly import Reassembly
from outlast.retry import WaitTimeoutError, with_retries

__all__ = [
    "STATUSES",
    "ApiError",
    "ApiUnreachableError",
    "BudgetDocument",
    "Client",
    "ConnectionLostError",
    "DocumentStatusDocument",
    "NotSignedInError",
    "ResultDocument",
    "StatusDocument",
    "TransportError",
    "UnexpectedAnswerError",
    "WaitTimeout",
]


class WaitTimeout(Exception):  # noqa: N818 - reads as what happened: `except WaitTimeout`
    """`wait` ran out of time; `.document` is the job as last seen (it goes on)."""

    def __init__(self, document: StatusDocument) -> None:
        super().__init__(f"job {document.job_id} is still {document.status}")
        self.document = document


class _TextSink:
    """An OutputSink that hands the whole text shown to a callback when it changes."""

    def __init__(self, on_text: Callable[[str], None] | None = None) -> None:
        self._on_text = on_text

    def event(self, attempt: int, seq: int, text: str) -> None:
        """Each event is in the reassembly already."""

    def changed(self, text: Reassembly) -> None:
        """Hand the text on."""
        if self._on_text is not None:
            self._on_text(text.text())


class Client:
    """The outlast API's calls, each retried under the command line's policy."""

    def __init__(
        self,
        api_url: str | None = None,
        *,
        token: str | None = None,
        profile: str | None = None,
        timeout_seconds: float = 30.0,
    ) -> None:
        """`token`: an ID token; without one, $OUTLAST_TOKEN, else the profile's sign-in (refreshed
        when it expires). `api_url`: else $OUTLAST_API_URL, else the profile's."""
        connection = resolve(api_url, profile=profile, token=token)
        self._api = HttpApi(connection.api_url, connection.token, timeout_seconds)

    @property
    def api_url(self) -> str:
        """The API's base URL."""
        return self._api.api_url

    def submit(
        self,
        operation: str,
        text: str | None = None,
        *,
        document_id: str | None = None,
        labels: Sequence[str] | None = None,
        schema: Mapping[str, Any] | None = None,
        model: str | None = None,
        max_output_tokens: int | None = None,
        stream: bool = False,
        idempotency_key: str | None = None,
    ) -> StatusDocument:
        """Submit a job on `text` or on your Ready document `document_id` (exactly one; the same
        idempotency key always gets the same job: retries are safe); extract takes the JSON Schema
        of the object to extract as `schema`; `stream`: write its output as it is generated
        (`follow_output` reads it as it grows)."""
        if (text is None) == (document_id is None):
            raise ValueError("give exactly one of text and document_id")
        options = JobOptions.model_validate(
            {
                key: value
                for key, value in (
                    ("labels", list(labels or [])),
                    ("schema", dict(schema or {})),
                    ("model", model),
                    ("maxOutputTokens", max_output_tokens),
                    ("stream", stream),
                )
                if value
            }
        )
        request = SubmitRequest.model_validate(
            {
                "operation": operation,
                "input": JobInputBody(text=text)
                if text is not None
                else JobInputBody.model_validate({"documentId": document_id}),
                "options": options if options.model_fields_set else None,
            }
        )
        key = idempotency_key or str(uuid.uuid4())
        return with_retries(lambda: self._api.submit(request, key), "the submit").document

    def get(self, job_id: str) -> StatusDocument:
        """The job's status document."""
        return with_retries(lambda: self._api.get_job(job_id), "the status request").document

    def wait(self, job_id: str, *, timeout: float | None = None) -> StatusDocument:
        """The job once it has ended (live updates when the API offers them, else polling)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        answer = with_retries(lambda: self._api.get_job(job_id), "the status request", deadline=deadline)
        followed = Followed.of(answer)
        try:
            Follower(self._api).until_ended(followed, deadline, Quiet())
        except (TimeUpError, WaitTimeoutError):
            raise WaitTimeout(followed.document) from None
        return followed.document

    def result(self, job_id: str) -> ResultDocument:
        """A Succeeded job's output (ApiError 409 while it is not Succeeded)."""
        return with_retries(lambda: self._api.get_result(job_id), "the result request").document

    def output(self, job_id: str) -> str:
        """A streaming job's text as far as it is written (the result's attempt once it has ended)."""
        text = Reassembly()
        OutputFollower(self._api).catch_up(job_id, text, _TextSink())
        return text.text()

    def follow_output(
        self, job_id: str, on_text: Callable[[str], None] | None = None, *, timeout: float | None = None
    ) -> str:
        """Follow a streaming job's text until the job ends (the live connection when it can be had,
        else polling); `on_text` gets the whole text shown each time it grows or another attempt's
        replaces it. The text as it ended; WaitTimeout when `timeout` passes first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        text = Reassembly()
        try:
            OutputFollower(self._api).follow(job_id, text, _TextSink(on_text), deadline)
        except (TimeUpError, WaitTimeoutError):
            raise WaitTimeout(self.get(job_id)) from None
        return text.text()

    def cancel(self, job_id: str) -> StatusDocument:
        """Cancel the job: Canceled at once if Pending, CancellationRequested if Running."""
        return with_retries(lambda: self._api.cancel(job_id), "the cancel request").document

    def list(self, *, status: str | None = None, page_size: int = 20) -> Iterator[StatusDocument]:
        """Your jobs, newest first, page after page (status: one of STATUSES)."""
        cursor: str | None = None
        while True:
            page = with_retries(
                partial(self._api.list_jobs, status, page_size, cursor), "the list request"
            ).document
            yield from page.items
            cursor = page.next_cursor
            if cursor is None:
                return

    def upload_document(self, path: str | Path, *, timeout: float | None = None) -> DocumentStatusDocument:
        """Upload a .pdf, .docx, .md or .txt file as a document and wait until its text is read:
        the document, Ready (submit on its `document_id`) or Rejected (its `error` says why).
        Not retried: each call makes a new document."""
        document_id = upload_document(self._api, Path(path))
        deadline = None if timeout is None else time.monotonic() + timeout
        return wait_settled(self._api, document_id, deadline)

    def document(self, document_id: str) -> DocumentStatusDocument:
        """Where one of your documents stands."""
        return with_retries(lambda: self._api.get_document(document_id), "the document request").document

    def delete_document(self, document_id: str) -> None:
        """Delete one of your documents (ApiError 409 document_in_use while a job reads it)."""
        with_retries(lambda: self._api.delete_document(document_id), "the delete request")

    def budget(self) -> BudgetDocument:
        """Your tenant's token budget this month."""
        return with_retries(self._api.get_budget, "the budget request").document
