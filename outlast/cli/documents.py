"""`outlast documents`: upload a file once, then run jobs on it (`outlast submit OP --document ID`).

Thin like the job commands: parse, one call into the API (outlast.api.http) or the uploader
(outlast.document_upload), print through the console. `upload` prints the document's id alone
on stdout (so `ID=$(outlast documents upload report.pdf)` works) once it is Ready.
"""

from __future__ import annotations

from pathlib import Path

import click

from outlast.api.models import DocumentStatusDocument
from outlast.cli.console import Console
from outlast.cli.errors import ExitCode
from outlast.cli.framework import Section, Verb
from outlast.cli.session import api_options, guarded, json_option, open_session
from outlast.cli.uploading import upload_and_wait

SECTION = "DOCUMENT COMMANDS"
ERROR = "usage, sign-in, connection or HTTP error (4xx/5xx)"
COLUMNS = ("DOCUMENT", "STATUS", "FILE", "BYTES", "CREATED")

documents = Section(
    "documents",
    help="Upload files once (PDF, docx, Markdown, text) to run jobs on.",
    section="JOB COMMANDS",
    sections=(SECTION,),
    examples=(
        "outlast documents upload report.pdf",
        "outlast submit summarize --document $(outlast documents upload report.pdf) --wait",
        "outlast documents list",
    ),
)


def _human(document: DocumentStatusDocument) -> str:
    lines = [
        f"document  {document.document_id}",
        f"status    {document.status}",
        f"file      {document.filename} ({document.content_type}, {document.bytes} bytes declared)",
    ]
    if document.ready is not None:
        pages = f"{document.ready.pages} pages, " if document.ready.pages is not None else ""
        lines.append(f"text      {pages}{document.ready.text_bytes} bytes, sha256 {document.ready.sha256}")
    if document.error is not None:
        lines.append(f"error     {document.error.code}: {document.error.message}")
    lines.append(f"expires   {document.expires_at.isoformat()}")
    return "\n".join(lines)


@documents.command(
    "upload",
    cls=Verb,
    section=SECTION,
    exit_codes={
        ExitCode.OK: "the document is Ready (its id is printed)",
        ExitCode.FAILED: "the document was Rejected (its code is said)",
        ExitCode.ERROR: ERROR + ", a refused upload, or --timeout passed",
    },
    examples=("outlast documents upload report.pdf", "outlast documents upload notes.md --json"),
)
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--timeout", type=click.FloatRange(min=1), metavar="SECONDS", help="stop waiting after this long"
)
@api_options
@json_option
@guarded
def upload(
    *,
    file: Path,
    timeout: float | None,
    api_url: str | None,
    profile: str | None,
    token_env: str,
    json_mode: bool,
) -> int:
    """Upload FILE as a document and wait until its text is read.

    The type comes from the name: .pdf, .docx, .md/.markdown, .txt. Prints the document's id once
    it is Ready; a Rejected document's code and message go to stderr.
    """
    session = open_session(Console(json_mode), api_url, profile, token_env)
    document = upload_and_wait(session, file, timeout)
    body = document.model_dump(mode="json", by_alias=True)
    if document.status == "Rejected":
        error = document.error
        session.console.note(f"rejected: {error.code}: {error.message}" if error else "rejected")
        session.console.show(None, body)
        return ExitCode.FAILED
    session.console.show(document.document_id, body)
    return ExitCode.OK


@documents.command(
    "show",
    cls=Verb,
    section=SECTION,
    exit_codes={ExitCode.OK: "the document was shown", ExitCode.ERROR: ERROR + "; 404 when not yours"},
)
@click.argument("document_id")
@api_options
@json_option
@guarded
def show(document_id: str, api_url: str | None, profile: str | None, token_env: str, json_mode: bool) -> int:
    """Show where a document stands."""
    session = open_session(Console(json_mode), api_url, profile, token_env)
    answer = session.call(lambda: session.api.get_document(document_id), "the document request")
    session.console.show(_human(answer.document), answer.body)
    return ExitCode.OK


@documents.command(
    "list",
    cls=Verb,
    section=SECTION,
    exit_codes={ExitCode.OK: "the documents were listed (none is not an error)", ExitCode.ERROR: ERROR},
)
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True, help="documents to show")
@click.option("--cursor", help="start from this nextCursor")
@api_options
@json_option
@guarded
def list_documents(
    *,
    limit: int,
    cursor: str | None,
    api_url: str | None,
    profile: str | None,
    token_env: str,
    json_mode: bool,
) -> int:
    """List your documents, newest first."""
    console = Console(json_mode)
    session = open_session(console, api_url, profile, token_env)
    answer = session.call(lambda: session.api.list_documents(limit, cursor), "the list request")
    page = answer.document
    rows = [(d.document_id, d.status, d.filename, str(d.bytes), d.created_at.isoformat()) for d in page.items]
    if json_mode:
        console.show(None, answer.body)
    elif rows:
        console.table(COLUMNS, rows)
    else:
        console.show("no documents", None)
    if page.next_cursor is not None:
        console.note(f"more documents: --cursor {page.next_cursor}")
    return ExitCode.OK


@documents.command(
    "delete",
    cls=Verb,
    section=SECTION,
    exit_codes={
        ExitCode.OK: "the document, its file and its text are gone",
        ExitCode.ERROR: ERROR + "; 409 document_in_use while a job reads it",
    },
)
@click.argument("document_id")
@api_options
@guarded
def delete(document_id: str, api_url: str | None, profile: str | None, token_env: str) -> int:
    """Delete a document (refused while a job that reads it has not ended)."""
    session = open_session(Console(json_mode=False), api_url, profile, token_env)
    session.call(lambda: session.api.delete_document(document_id), "the delete request")
    session.console.note(f"document {document_id} deleted")
    return ExitCode.OK
