"""The user's verbs: `submit`, `status`, `result`, `cancel`, `list`, `watch`, `budget`.

Each is thin: parse, one call into the API (outlast.api.http) or the follower (outlast.follow),
print through the console. Without --json, `submit --wait` and `status --wait` print only the
result text on stdout, so it can be redirected to a file.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from outlast.api.http import (
    OPERATIONS,
    STATUSES,
    TERMINAL_STATUSES,
    Answer,
    ApiError,
    ApiUnreachableError,
    JsonObject,
    TransportError,
    UnexpectedAnswerError,
)
from outlast.api.models import JobOptions, JobPage, StatusDocument, SubmitRequest
from outlast.cli.console import Console
from outlast.cli.errors import CliError, ExitCode
from outlast.cli.formats import (
    JOB_COLUMNS,
    format_budget,
    format_error,
    format_output,
    format_status,
    job_row,
)
from outlast.cli.framework import Verb
from outlast.cli.progress import Progress
from outlast.cli.session import Session, api_options, guarded, json_option, open_session
from outlast.cli.stream_output import ended_status, stream_output
from outlast.cli.uploading import upload_and_wait
from outlast.document_upload import BINARY_SUFFIXES
from outlast.follow import Followed, TimeUpError
from outlast.retry import FALLBACK_POLL_SECONDS, WaitTimeoutError

SECTION = "JOB COMMANDS"
MAX_PAGE_LIMIT = 100
OK_REQUEST = "the request did what was asked"
ERROR = "usage, sign-in, connection or HTTP error (4xx/5xx)"
WAIT_CODES = {
    ExitCode.OK: "the job Succeeded (with --wait), or the request did what was asked",
    ExitCode.FAILED: "the job Failed",
    ExitCode.ERROR: ERROR,
    ExitCode.CANCELED: "the job was Canceled",
    ExitCode.STILL_RUNNING: "--wait ran out of --timeout, or Ctrl-C stopped it: the job goes on",
}


def exit_code_for(status: str) -> ExitCode:
    """The exit code that reports a job in `status` (non-terminal statuses are not failures)."""
    return {"Failed": ExitCode.FAILED, "Canceled": ExitCode.CANCELED}.get(status, ExitCode.OK)


def submit_may_have_happened(error: BaseException) -> bool:
    """After a failed submit: could the job exist anyway? Not after a 4xx or a refused connection."""
    if isinstance(error, ApiUnreachableError):
        return False
    return not (isinstance(error, ApiError) and error.status < 500)


def new_idempotency_key() -> str:
    """A fresh key for one logical submit: a random UUIDv4."""
    return str(uuid.uuid4())


def _idempotency_key(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None and (not 1 <= len(value) <= 255 or any(not 0x21 <= ord(c) <= 0x7E for c in value)):
        raise click.BadParameter("must be 1-255 visible ASCII characters (no spaces)")
    return value


def build_submit_request(
    operation: str,
    text: str | None,
    labels: tuple[str, ...],
    model: str | None,
    max_output_tokens: int | None,
    *,
    schema: JsonObject | None = None,
    stream: bool = False,
    document_id: str | None = None,
) -> SubmitRequest:
    """The POST /v1/jobs body: options only when given (explicit nulls are a 400); CliError for a
    body the contract refuses anyway (an empty text, a label of spaces...). Whether a schema is in
    the subset extract takes is the API's to say (400 invalid_schema, with where)."""
    try:
        return _submit_request(
            operation,
            {"documentId": document_id} if document_id is not None else {"text": text},
            labels,
            model,
            max_output_tokens,
            schema=schema,
            stream=stream,
        )
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
            for problem in error.errors()
        )
        raise CliError(f"the request is not one the API takes: {problems}") from None


def _submit_request(
    operation: str,
    job_input: JsonObject,
    labels: tuple[str, ...],
    model: str | None,
    max_output_tokens: int | None,
    *,
    schema: JsonObject | None,
    stream: bool,
) -> SubmitRequest:
    options = JobOptions.model_validate(
        {
            key: value
            for key, value in (
                ("model", model),
                ("maxOutputTokens", max_output_tokens),
                ("labels", list(labels)),
                ("schema", schema),
                ("stream", stream),
            )
            if value
        }
    )
    return SubmitRequest.model_validate(
        {
            "operation": operation,
            "input": job_input,
            "options": options if options.model_fields_set else None,
        }
    )


def _read_text(text: str | None, file: str | None) -> str:
    if text is not None:
        return text
    if file is None:
        raise click.UsageError("give the input: --text TEXT or --file PATH (- for stdin)")
    try:
        if file == "-":
            return sys.stdin.read()
        return Path(file).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CliError(f"{file} is not UTF-8 text") from None
    except OSError as error:
        raise CliError(f"cannot read {file}: {error.strerror or error}") from None


def _job_input(
    opened: Callable[[], Session],
    text: str | None,
    file: str | None,
    document_id: str | None,
    timeout: float | None,
) -> tuple[Session | None, str | None, str | None]:
    """The session if one was needed already, and the text or the document id of the input: a PDF
    or docx --file is uploaded first (the job runs on the document once it is Ready)."""
    if file is not None and Path(file).suffix.lower() in BINARY_SUFFIXES:
        session = opened()
        return session, None, _ready_document_id(session, Path(file), timeout)
    if document_id is not None:
        return None, None, document_id
    return None, _read_text(text, file), None


def _ready_document_id(session: Session, path: Path, timeout: float | None) -> str:
    """Upload a PDF or docx --file as a document; its id once Ready (CliError, exit 1, if Rejected)."""
    if not path.is_file():
        raise CliError(f"cannot read {path}: no such file")
    document = upload_and_wait(session, path, timeout)
    if document.error is not None:
        raise CliError(
            f"document {document.document_id} was rejected: {document.error.code}: {document.error.message}",
            ExitCode.FAILED,
        )
    return document.document_id


def read_schema(value: str | None) -> JsonObject | None:
    """--schema: the JSON Schema itself (a value that starts with `{`) or the path of a file holding it."""
    if value is None:
        return None
    if value.lstrip().startswith("{"):
        source, text = "--schema", value
    else:
        try:
            source, text = value, Path(value).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
            raise CliError(f"cannot read the schema from {value}: {reason or error}") from None
    try:
        schema = json.loads(text)
    except ValueError:
        raise CliError(f"{source} is not JSON") from None
    if not isinstance(schema, dict):
        raise CliError(f"{source} must be a JSON object (a schema with type object)")
    return schema


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _check_timeout(wait: bool, timeout: float | None) -> None:
    if timeout is not None and not wait:
        raise click.UsageError("--timeout only applies with --wait")


def wait_options[F: Callable[..., Any]](function: F) -> F:
    """--wait and --timeout."""
    function = click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        metavar="SECONDS",
        help="with --wait: give up waiting after this long",
    )(function)
    return click.option(
        "--wait", is_flag=True, help="wait for the job to end (Ctrl-C stops waiting, not the job)"
    )(function)


# --- submit ------------------------------------------------------------------------------------


@click.command(
    "submit",
    cls=Verb,
    section=SECTION,
    exit_codes=WAIT_CODES,
    examples=(
        "outlast submit summarize --file report.txt --wait > summary.txt",
        "outlast submit analyze --file report.txt --stream",
        "outlast submit classify --text 'Refund please' --label billing --label support --json",
        "outlast submit extract --file invoice.txt --schema invoice.schema.json --wait > invoice.json",
        "outlast submit summarize --file report.pdf --wait",
        "outlast submit analyze --document 0b8f6c1e-2a4d-4e7b-9c3f-5d6e7f8a9b0c --wait",
    ),
)
@click.argument("operation", type=click.Choice(OPERATIONS), metavar="OPERATION")
@click.option("--text", help="the input text")
@click.option(
    "--file",
    metavar="PATH",
    help="read the input text from PATH (UTF-8; - for stdin); a .pdf or .docx is uploaded as a document",
)
@click.option("--document", "document_id", metavar="ID", help="run the job on your uploaded document ID")
@click.option("--label", "labels", multiple=True, metavar="L", help="a label for classify (repeat it)")
@click.option(
    "--schema",
    metavar="FILE|JSON",
    help="for extract: the JSON Schema of the object to extract (a file, or the JSON itself)",
)
@click.option("--model", help="a model from the API's allowlist")
@click.option("--max-output-tokens", type=click.IntRange(1, 4096), metavar="N", help="cap on output tokens")
@click.option(
    "--idempotency-key",
    callback=_idempotency_key,
    metavar="KEY",
    help="reuse the key of an earlier submit to get the same job (default: a new UUID)",
)
@click.option(
    "--stream",
    is_flag=True,
    help="print the output as it is written (summarize, analyze, extract), until the job ends; with --json, "
    "each output event as a JSON line",
)
@wait_options
@api_options
@json_option
@guarded
def submit(
    *,
    operation: str,
    text: str | None,
    file: str | None,
    document_id: str | None,
    labels: tuple[str, ...],
    schema: str | None,
    model: str | None,
    max_output_tokens: int | None,
    idempotency_key: str | None,
    stream: bool,
    wait: bool,
    timeout: float | None,
    api_url: str | None,
    profile: str | None,
    token_env: str,
    json_mode: bool,
) -> int:
    """Submit a job.

    OPERATION is summarize, analyze, classify or extract; the input comes from --text, --file or
    --document (a document of yours: `outlast documents upload`). A PDF or docx --file is uploaded
    as a document, and the job runs on its text once it is Ready.
    extract answers with a JSON object that matches --schema. The idempotency key it prints makes
    a retry safe: the same key gets the same job. With --stream the output is printed as it is
    written (after a dropped connection or a retry of the job it goes on from its last event).
    """
    if sum(given is not None for given in (text, file, document_id)) > 1:
        raise click.UsageError("give the input once: --text, --file or --document")
    _check_timeout(wait or stream, timeout)
    console = Console(json_mode)
    session, job_text, document_id = _job_input(
        lambda: open_session(console, api_url, profile, token_env), text, file, document_id, timeout
    )
    request = build_submit_request(
        operation,
        job_text,
        labels,
        model,
        max_output_tokens,
        schema=read_schema(schema),
        stream=stream,
        document_id=document_id,
    )
    session = session or open_session(console, api_url, profile, token_env)
    key = idempotency_key or new_idempotency_key()
    # Said before the request leaves: whatever happens next, the user can retry with this key.
    console.note(f"idempotency key: {key}")
    failures: list[BaseException] = []

    def send() -> Answer[StatusDocument]:
        try:
            return session.api.submit(request, key)
        except (TransportError, ApiError) as error:
            failures.append(error)
            raise

    try:
        answer = session.call(send, f"the submit with the same idempotency key {key}")
    except (TransportError, ApiError, KeyboardInterrupt) as error:
        # Any attempt may have made the job, not only the last: a refused retry proves nothing.
        if any(submit_may_have_happened(failure) for failure in [*failures, error]):
            console.note(
                f"the job may or may not exist: rerun with --idempotency-key {key} to find out safely"
            )
        raise
    job_id = answer.document.job_id
    if answer.replayed:
        console.note(f"replayed: same job as before (idempotency key {key})")
    status_url = session.api.url_for(answer.location or f"/v1/jobs/{job_id}")
    if stream:
        console.note(f"job {job_id} ({status_url})")
        return stream_and_report(session, job_id, _deadline(timeout))
    if not wait:
        console.show(f"job     {job_id}\nstatus  {answer.document.status}\nurl     {status_url}", answer.body)
        console.note(f"follow it: outlast status {job_id} --wait")
        return ExitCode.OK
    console.note(f"job {job_id} ({status_url})")
    # The submit's own retries are bounded by their budget; --timeout is the wait for the job.
    return wait_and_report(session, Followed.of(answer), _deadline(timeout))


@dataclass(frozen=True)
class Waited:
    """Where a wait ended: the job as last seen, and why it stopped early if it did."""

    followed: Followed
    stopped_early: str | None = None


def _wait(session: Session, followed: Followed, deadline: float | None) -> Waited:
    progress = Progress(session.console, followed.document.job_id)
    try:
        session.follower.until_ended(followed, deadline, progress)
    except (WaitTimeoutError, TimeUpError):
        return Waited(followed, f"timed out after {progress.elapsed():.0f} s")
    except KeyboardInterrupt:
        return Waited(followed, "stopped waiting")
    finally:
        progress.close()
    return Waited(followed)


def wait_and_report(session: Session, followed: Followed, deadline: float | None) -> ExitCode:
    """Wait for the job, then print its output (Succeeded) or say how it ended."""
    console = session.console
    waited = _wait(session, followed, deadline)
    document = followed.document
    job_id, status = document.job_id, document.status
    if waited.stopped_early:
        console.note(
            f"{waited.stopped_early}: job {job_id} is still {status} and goes on without you.\n"
            f"  resume: outlast status {job_id} --wait\n  cancel: outlast cancel {job_id}"
        )
        console.show(None, followed.body)
        return ExitCode.STILL_RUNNING
    if status == "Succeeded":
        result = session.call(lambda: session.api.get_result(job_id), "the result request")
        console.show(format_output(result.document), result.body)
        return ExitCode.OK
    if status == "Failed":
        console.note(f"job {job_id} Failed after {document.attempts} attempt(s): {format_error(document)}")
    else:
        console.note(f"job {job_id} was Canceled")
    console.show(None, followed.body)
    return exit_code_for(status)


def stream_and_report(session: Session, job_id: str, deadline: float | None) -> ExitCode:
    """Print the job's output as it is written, then say how the job ended."""
    console = session.console
    try:
        stream_output(session, job_id, deadline)
    except (WaitTimeoutError, TimeUpError, KeyboardInterrupt) as stopped:
        why = "stopped waiting" if isinstance(stopped, KeyboardInterrupt) else "timed out"
        console.note(
            f"{why}: job {job_id} goes on without you.\n  resume: outlast output {job_id} --follow\n"
            f"  cancel: outlast cancel {job_id}"
        )
        return ExitCode.STILL_RUNNING
    document = ended_status(session, job_id)
    if document.status == "Failed":
        console.note(f"job {job_id} Failed after {document.attempts} attempt(s): {format_error(document)}")
    elif document.status == "Canceled":
        console.note(f"job {job_id} was Canceled (its output so far is above)")
    return exit_code_for(document.status)


# --- status, result, cancel ----------------------------------------------------------------------


@click.command(
    "status",
    cls=Verb,
    section=SECTION,
    exit_codes={
        **WAIT_CODES,
        ExitCode.OK: "the job Succeeded, or has not ended yet (without --wait)",
    },
    examples=("outlast status 3f0c... --wait", "outlast status 3f0c... --json | jq .status"),
)
@click.argument("job_id")
@wait_options
@api_options
@json_option
@guarded
def status(
    *,
    job_id: str,
    wait: bool,
    timeout: float | None,
    api_url: str | None,
    profile: str | None,
    token_env: str,
    json_mode: bool,
) -> int:
    """Show a job's status, or wait for it to end.

    With --wait it follows the job (live updates, else polling) and prints its output.
    """
    _check_timeout(wait, timeout)
    session = open_session(Console(json_mode), api_url, profile, token_env)
    deadline = _deadline(timeout) if wait else None
    answer = session.call(lambda: session.api.get_job(job_id), "the status request", deadline)
    if wait:
        return wait_and_report(session, Followed.of(answer), deadline)
    document = answer.document
    session.console.show(format_status(document), answer.body)
    if document.status not in TERMINAL_STATUSES:
        seconds = answer.retry_after or FALLBACK_POLL_SECONDS
        session.console.note(f"not finished: check again in {seconds} s, or add --wait")
    elif document.status == "Succeeded":
        session.console.note(f"the output: outlast result {document.job_id}")
    return exit_code_for(document.status)


@click.command(
    "result",
    cls=Verb,
    section=SECTION,
    exit_codes={ExitCode.OK: "the output was printed", ExitCode.ERROR: ERROR + "; 409 while not Succeeded"},
    examples=("outlast result 3f0c... > summary.txt", "outlast result 3f0c... --json | jq .output.total"),
)
@click.argument("job_id")
@api_options
@json_option
@guarded
def result(job_id: str, api_url: str | None, profile: str | None, token_env: str, json_mode: bool) -> int:
    """Print a Succeeded job's output.

    An extract job's output is its JSON object, printed indented; --json prints the API's document,
    whose output is that object.
    """
    session = open_session(Console(json_mode), api_url, profile, token_env)
    answer = session.call(lambda: session.api.get_result(job_id), "the result request")
    session.console.show(format_output(answer.document), answer.body)
    return ExitCode.OK


@click.command(
    "cancel",
    cls=Verb,
    section=SECTION,
    exit_codes={
        ExitCode.OK: "canceled, or cancellation requested",
        ExitCode.ERROR: ERROR + "; 409 once ended",
    },
)
@click.argument("job_id")
@api_options
@json_option
@guarded
def cancel(job_id: str, api_url: str | None, profile: str | None, token_env: str, json_mode: bool) -> int:
    """Cancel a job.

    A Pending job is Canceled at once; a Running one stops at its next check.
    """
    session = open_session(Console(json_mode), api_url, profile, token_env)
    answer = session.call(lambda: session.api.cancel(job_id), "the cancel request")
    document = answer.document
    if answer.status == 202:
        human = (
            f"job {document.job_id}: {document.status}\n"
            "cancellation requested: the job is running and stops at its next check "
            f"(follow it: outlast status {document.job_id} --wait)"
        )
    else:
        human = (
            f"job {document.job_id}: {document.status}\n"
            "canceled: it had not started (or was already canceled)"
        )
    session.console.show(human, answer.body)
    return ExitCode.OK


# --- list, budget ----------------------------------------------------------------------------------


def pages(
    session: Session, status: str | None, limit: int, cursor: str | None, everything: bool
) -> Iterator[Answer[JobPage]]:
    """Pages of the list; short pages with a nextCursor are followed, never mistaken for the end."""
    wanted, seen = limit, {cursor}
    while True:
        # Without --all, ask only for what is still missing so the last cursor stays exact.
        size = limit if everything else wanted
        page = session.call(partial(session.api.list_jobs, status, size, cursor), "the list request")
        yield page
        wanted -= len(page.document.items)
        cursor = page.document.next_cursor
        if cursor is None or (not everything and wanted <= 0):
            return
        if cursor in seen:
            raise UnexpectedAnswerError("the API sent the same nextCursor twice")
        seen.add(cursor)


@click.command(
    "list",
    cls=Verb,
    section=SECTION,
    exit_codes={ExitCode.OK: "the jobs were listed (none is not an error)", ExitCode.ERROR: ERROR},
    examples=("outlast list --status Failed", "outlast list --all --json | jq '.items[].jobId'"),
)
@click.option("--status", "status_filter", type=click.Choice(STATUSES), help="only jobs in this status")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_PAGE_LIMIT),
    default=20,
    show_default=True,
    help="jobs to show (page size with --all)",
)
@click.option("--all", "everything", is_flag=True, help="follow nextCursor to the last page")
@click.option("--cursor", help="start from this nextCursor")
@api_options
@json_option
@guarded
def list_jobs(
    *,
    status_filter: str | None,
    limit: int,
    everything: bool,
    cursor: str | None,
    api_url: str | None,
    profile: str | None,
    token_env: str,
    json_mode: bool,
) -> int:
    """List your jobs, newest first."""
    console = Console(json_mode)
    session = open_session(console, api_url, profile, token_env)
    items: list[JsonObject] = []
    rows: list[tuple[str, ...]] = []
    next_cursor: str | None = None
    for page in pages(session, status_filter, limit, cursor, everything):
        items += page.body["items"]
        rows += [job_row(item) for item in page.document.items]
        next_cursor = page.document.next_cursor
    if json_mode:
        console.show(None, {"items": items, "nextCursor": next_cursor})
    elif rows:
        console.table(JOB_COLUMNS, rows)
    else:
        console.show("no jobs", None)
    if next_cursor is not None:
        console.note(f"more jobs: add --all, or --cursor {next_cursor}")
    return ExitCode.OK


@click.command(
    "budget",
    cls=Verb,
    section=SECTION,
    exit_codes={ExitCode.OK: "the budget was shown", ExitCode.ERROR: ERROR},
)
@api_options
@json_option
@guarded
def budget(api_url: str | None, profile: str | None, token_env: str, json_mode: bool) -> int:
    """Show your tenant's token budget this month."""
    session = open_session(Console(json_mode), api_url, profile, token_env)
    answer = session.call(session.api.get_budget, "the budget request")
    session.console.show(format_budget(answer.document), answer.body)
    return ExitCode.OK
