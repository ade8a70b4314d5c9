"""A file to a Ready document: its type from its name, the create, the presigned POST, the wait.

The command line's `documents upload` and `submit --file` (for PDF and docx) go through here.
The create is not idempotent (each makes a document) and the upload is one POST, so both are
tried once: a failure says so, and uploading again makes a new document (the one left
AwaitingUpload expires). The wait polls GET /v1/documents/{id} until Ready or Rejected.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from outlast.api.http import HttpApi
from outlast.api.models import DocumentStatusDocument
from outlast.retry import with_retries
from outlast.uploads import UploadAnswer, post_upload

# The types the API takes, by file name suffix (DESIGN.md, "Documents").
CONTENT_TYPES = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".text": "text/plain",
}
# Formats whose text the service extracts (submit --file uploads these instead of reading them).
BINARY_SUFFIXES = frozenset({".pdf", ".docx"})
POLL_SECONDS = 1.0


class UploadRefusedError(Exception):
    """The upload's endpoint refused the file (S3's XML error: its code and message)."""

    def __init__(self, answer: UploadAnswer) -> None:
        super().__init__(f"the upload was refused ({answer.status}): {_s3_error(answer.body)}")
        self.answer = answer


class UnknownTypeError(ValueError):
    """The file's name says no type the API takes."""


class DocumentWaitTimeout(Exception):  # noqa: N818 - reads as what happened
    """The document did not settle before the deadline."""

    def __init__(self, document: DocumentStatusDocument) -> None:
        super().__init__(f"document {document.document_id} is still {document.status}")
        self.document = document


def content_type_of(path: Path) -> str:
    """The API's content type for a file name (UnknownTypeError for any other suffix)."""
    found = CONTENT_TYPES.get(path.suffix.lower())
    if found is None:
        names = ", ".join(sorted(CONTENT_TYPES))
        raise UnknownTypeError(f"{path.name}: a document is one of {names}")
    return found


def upload_document(
    api: HttpApi,
    path: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
    on_created: Callable[[str], None] | None = None,
) -> str:
    """Create the document and upload the file; its id (the ingest then reads it)."""
    content_type = content_type_of(path)
    data = path.read_bytes()
    created = api.create_document(path.name, content_type, len(data)).document
    if on_created is not None:
        on_created(created.document_id)
    upload = created.upload

    answer = post_upload(
        upload.url, upload.fields, filename=path.name, data=data, content_type=content_type, progress=progress
    )
    if not answer.ok:
        raise UploadRefusedError(answer)
    return created.document_id


def wait_settled(api: HttpApi, document_id: str, deadline: float | None = None) -> DocumentStatusDocument:
    """The document once Ready or Rejected (DocumentWaitTimeout past the deadline)."""
    while True:
        answer = with_retries(lambda: api.get_document(document_id), "the document request")
        document = answer.document
        if document.status != "AwaitingUpload":
            return document
        if deadline is not None and time.monotonic() >= deadline:
            raise DocumentWaitTimeout(document)
        time.sleep(answer.retry_after or POLL_SECONDS)


def _s3_error(body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    code = text.partition("<Code>")[2].partition("</Code>")[0]
    message = text.partition("<Message>")[2].partition("</Message>")[0]
    return f"{code}: {message}" if code else "no error document"
