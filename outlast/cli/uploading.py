"""Uploading a file as a document from the command line: a progress line, then the wait for its
text (`documents upload`, and `submit --file` with a PDF or a docx)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from outlast.api.models import DocumentStatusDocument
from outlast.cli.errors import CliError
from outlast.cli.session import Session
from outlast.document_upload import (
    DocumentWaitTimeout,
    UnknownTypeError,
    UploadRefusedError,
    upload_document,
    wait_settled,
)


def upload_and_wait(session: Session, path: Path, timeout: float | None) -> DocumentStatusDocument:
    """Upload the file (a progress line on a terminal), then wait until it is Ready or Rejected."""
    console = session.console

    def progress(sent: int, total: int) -> None:
        if console.live:
            console.redraw(f"uploading {path.name}: {sent * 100 // max(total, 1)}% of {total} bytes")

    try:
        document_id = upload_document(
            session.api, path, progress=progress, on_created=lambda i: console.note(f"document {i}")
        )
    except UnknownTypeError as error:
        raise click.UsageError(str(error)) from None
    except UploadRefusedError as error:
        raise CliError(str(error)) from None
    console.end_line()
    console.note("uploaded; waiting for its text to be read...")
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        return wait_settled(session.api, document_id, deadline)
    except DocumentWaitTimeout as error:
        raise CliError(f"{error}; see it later: outlast documents show {document_id}") from None
