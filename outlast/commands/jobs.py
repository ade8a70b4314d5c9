"""`outlast submit | status | result | cancel | list`: the user's side of the job API.

Each command talks to `--api-url` (else $OUTLAST_API_URL, else http://127.0.0.1:8000, the local
stack) with the ID token in $OUTLAST_TOKEN, or in the variable `--token-env NAME` names. The token
is never an argument, so it stays out of shell history and `ps`.

Exit codes:
    0    success: the job Succeeded, or the request did what was asked
    1    the job Failed
    2    usage, sign-in, connection or HTTP error (4xx/5xx)
    3    the job was Canceled
    4    still not finished when --wait timed out or was interrupted (the job goes on)
    130  interrupted (Ctrl-C) outside a wait

With --json, stdout holds exactly one JSON document (a status document, a result document or a
job page) and every human message goes to stderr. Without --json, `submit --wait` and
`status --wait` print only the result text on stdout, so it can be redirected to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO
from urllib.parse import urlsplit

from outlast.client import (
    OPERATIONS,
    STATUSES,
    TERMINAL_STATUSES,
    Answer,
    ApiError,
    ApiUnreachableError,
    BudgetDocument,
    ConnectionLostError,
    JobOptions,
    JobPage,
    OutlastClient,
    StatusDocument,
    SubmitRequest,
    TransportError,
    UnexpectedAnswerError,
    is_bearer_token,
)
from outlast.live import LiveUpdates, LiveUpdatesError, open_live

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
EXIT_CANCELED = 3
EXIT_STILL_RUNNING = 4
EXIT_INTERRUPTED = 130  # the shell's own convention for SIGINT

DEFAULT_API_URL = "http://127.0.0.1:8000"
API_URL_ENV = "OUTLAST_API_URL"
TOKEN_ENV = "OUTLAST_TOKEN"  # noqa: S105 - the variable's name, not a token
FALLBACK_POLL_SECONDS = 2  # when a non-terminal answer carries no Retry-After
LIVE_RECHECK_SECONDS = 30  # following the socket, a GET after this long without a push
NETWORK_BACKOFF_SECONDS = (1, 2, 4)  # one entry per retry after a lost connection or a 5xx
THROTTLE_RETRIES = 2  # 429s honoured before giving up
MAX_RETRY_DELAY_SECONDS = 60  # a retry is for a brief outage; a longer Retry-After is not waited out
RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_PAGE_LIMIT = 100

EXIT_CODES_EPILOG = """\
exit codes:
  0    success: the job Succeeded, or the request did what was asked
  1    the job Failed
  2    usage, sign-in, connection or HTTP error (4xx/5xx)
  3    the job was Canceled
  4    still not finished when --wait timed out or was interrupted (the job goes on)
  130  interrupted (Ctrl-C) outside a wait

The API is --api-url, else $OUTLAST_API_URL, else http://127.0.0.1:8000 (`outlast local up`).
The ID token is read from $OUTLAST_TOKEN (or --token-env NAME), never from the command line;
locally: export OUTLAST_TOKEN=$(outlast local token --user alice)
With --json, stdout is exactly one JSON document; messages go to stderr."""


class UsageError(Exception):
    """The command cannot run as given (missing token, unreadable file, bad URL)."""


class WaitTimeoutError(Exception):
    """--wait --timeout ran out while a request was still being retried."""


# --- pure helpers: exit codes and formatting (unit tested) -------------------------------------


def exit_code_for(status: str) -> int:
    """The exit code that reports a job in `status` (non-terminal statuses are not failures)."""
    return {"Failed": EXIT_FAILED, "Canceled": EXIT_CANCELED}.get(status, EXIT_OK)


def submit_may_have_happened(error: BaseException) -> bool:
    """After a failed submit: could the job exist anyway? Not after a 4xx or a refused connection."""
    if isinstance(error, ApiUnreachableError):
        return False
    return not (isinstance(error, ApiError) and error.status < 500)


def new_idempotency_key() -> str:
    """A fresh key for one logical submit: a random UUIDv4."""
    return str(uuid.uuid4())


def idempotency_key(value: str) -> str:
    """argparse type: 1-255 visible ASCII characters, as the API accepts."""
    if not 1 <= len(value) <= 255 or any(not 0x21 <= ord(c) <= 0x7E for c in value):
        raise argparse.ArgumentTypeError("must be 1-255 visible ASCII characters (no spaces)")
    return value


def variable_name(value: str) -> str:
    """argparse type: an environment variable's name (the message never echoes a pasted token)."""
    if (
        not value
        or not (value[0].isalpha() or value[0] == "_")
        or not all(c.isalnum() or c == "_" for c in value)
    ):
        raise argparse.ArgumentTypeError("must name an environment variable (letters, digits, _)")
    return value


def page_limit(value: str) -> int:
    """argparse type: a page size of 1-100."""
    try:
        limit = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if not 1 <= limit <= MAX_PAGE_LIMIT:
        raise argparse.ArgumentTypeError(f"must be 1-{MAX_PAGE_LIMIT}")
    return limit


def positive_seconds(value: str) -> float:
    """argparse type: a number of seconds above zero."""
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError("must be above zero")
    return seconds


def build_submit_request(
    operation: str, text: str, labels: list[str] | None, model: str | None, max_output_tokens: int | None
) -> SubmitRequest:
    """The POST /v1/jobs body: options only when given (explicit nulls are a 400)."""
    options: JobOptions = {}
    if model is not None:
        options["model"] = model
    if max_output_tokens is not None:
        options["maxOutputTokens"] = max_output_tokens
    if labels:
        options["labels"] = labels
    request: SubmitRequest = {"operation": operation, "input": {"text": text}}
    if options:
        request["options"] = options
    return request


def format_time(value: str | None) -> str:
    """An RFC 3339 UTC timestamp, shorter for a terminal: 2024-05-01 12:00:05Z."""
    if not value:
        return "-"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    return moment.strftime("%Y-%m-%d %H:%M:%S") + ("Z" if moment.utcoffset() is not None else "")


def format_error(document: StatusDocument) -> str:
    """`code: message` of a failed job, or '-'."""
    error = document.get("error")
    return f"{error['code']}: {error['message']}" if error else "-"


def format_status(document: StatusDocument) -> str:
    """A status document as aligned `name  value` lines."""
    usage = document.get("usage")
    rows = [
        ("job", document["jobId"]),
        ("status", document["status"]),
        ("operation", document.get("operation", "-")),
        ("attempts", str(document.get("attempts", "-"))),
        ("created", format_time(document.get("createdAt"))),
        ("updated", format_time(document.get("updatedAt"))),
        ("expires", format_time(document.get("expiresAt"))),
    ]
    if document.get("cancelRequestedAt"):
        rows.append(("cancel requested", format_time(document["cancelRequestedAt"])))
    if document.get("error"):
        rows.append(("error", format_error(document)))
    if usage:
        rows.append(("usage", f"{usage['inputTokens']} input tokens, {usage['outputTokens']} output tokens"))
    if document.get("reservedTokens"):
        rows.append(
            ("reserved", f"{document.get('reservedTokens')} tokens of the tenant's budget, until settled")
        )
    if document.get("resultUrl"):
        rows.append(("result", str(document["resultUrl"])))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)


TABLE_COLUMNS = ("JOB ID", "STATUS", "OPERATION", "CREATED", "ATTEMPTS", "ERROR")


def format_table(items: list[StatusDocument]) -> str:
    """Jobs as a table: id, status, operation, created, attempts, error code."""
    if not items:
        return "no jobs"
    rows = [TABLE_COLUMNS] + [
        (
            item["jobId"],
            item["status"],
            str(item.get("operation", "-")),
            format_time(item.get("createdAt")),
            str(item.get("attempts", "-")),
            _error_code(item),
        )
        for item in items
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(TABLE_COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def _error_code(document: StatusDocument) -> str:
    error = document.get("error")
    return error["code"] if error else "-"


def format_api_error(error: ApiError) -> list[str]:
    """An HTTP error for a human: the problem's title, detail, code and correlation id, or the message."""
    if error.is_problem:
        body = error.body
        lines = [f"error: {body.get('title', 'request failed')} (HTTP {error.status}, {error.code})"]
        if body.get("detail"):
            lines.append(f"  {body['detail']}")
        lines += [f"  - {p.get('name')}: {p.get('reason')}" for p in body.get("invalidParams") or []]
    elif isinstance(error.body.get("message"), str):
        # API Gateway's own answers (authorizer 401, unknown route 404, throttling 429).
        lines = [f"error: HTTP {error.status}: {error.body['message']}"]
        lines += [f"  {hint}" for hint in _gateway_hint(error.status)]
    else:
        snippet = " ".join(error.text.split())[:200]
        lines = [f"error: HTTP {error.status}" + (f": {snippet}" if snippet else "")]
    if error.correlation_id:
        lines.append(f"  correlation id: {error.correlation_id}")
    return lines


def _gateway_hint(status: int) -> list[str]:
    if status == 401:
        return ["the token was refused: is it a current Cognito ID token (locally: `outlast local token`)?"]
    if status == 404:
        return ["no such route: is --api-url the outlast API?"]
    return []


def format_update(document: StatusDocument) -> str:
    """One line of `outlast watch`: when, which job, its status, attempts, revision (and error code)."""
    line = (
        f"{format_time(document.get('updatedAt'))}  {document['jobId']}  {document['status']:<21}  "
        f"attempts {document.get('attempts', 0)}  revision {document.get('revision', '-')}"
    )
    return line + (f"  {_error_code(document)}" if document.get("error") else "")


def steps_of(document: StatusDocument | None) -> tuple[int, int] | None:
    """(completed, total) steps of a job planned in more than one, else None."""
    progress = document.get("progress") if document is not None else None
    if not progress or progress["totalSteps"] <= 1:
        return None
    return progress["completedSteps"], progress["totalSteps"]


def progress_line(job_id: str, document: StatusDocument | None, elapsed: float) -> str:
    """One line of --wait progress: status, attempts, steps (of a multi-step job) and time spent."""
    if document is None:
        return f"job {job_id}: waiting, {elapsed:.0f} s elapsed"
    attempts = document.get("attempts", 0)
    steps = steps_of(document)
    done = f", steps {steps[0]}/{steps[1]}" if steps else ""
    return f"job {job_id}: {document['status']}, attempts {attempts}{done}, {elapsed:.0f} s elapsed"


def is_loopback(api_url: str) -> bool:
    """True when the API runs on this machine (the local stack)."""
    return (urlsplit(api_url).hostname or "") in LOOPBACK_HOSTS


# --- output ----------------------------------------------------------------------------------


class Console:
    """Where output goes: results on stdout (one JSON document with --json), messages on stderr."""

    def __init__(self, json_mode: bool, out: TextIO, err: TextIO) -> None:
        self.json_mode = json_mode
        self.out = out
        self.err = err
        self.live = err.isatty()  # a terminal gets an updating progress line
        self._line_width = 0  # width of the open progress line on err, 0 when none
        self.bar: RichProgress | None = None  # a multi-step job's live progress bar, while shown

    def note(self, message: str) -> None:
        """A message for the human, never on stdout; it starts below an open progress line."""
        self.end_line()
        if self.bar is not None:
            self.bar.console.print(message, markup=False, highlight=False)  # above the live bar
            return
        print(message, file=self.err, flush=True)

    def redraw(self, line: str) -> None:
        """Overwrite the progress line (terminal only)."""
        # Pad over the previous, possibly longer line; no escape codes, so any terminal works.
        self.err.write("\r" + line.ljust(self._line_width))
        self.err.flush()
        self._line_width = max(len(line), 1)

    def end_line(self) -> None:
        """Leave the progress line as it is and move below it."""
        if self._line_width:
            print(file=self.err, flush=True)
            self._line_width = 0

    def show(self, human: str | None, document: Any) -> None:
        """The command's one result: the document with --json, else the human text (if any)."""
        self.end_line()
        if self.json_mode:
            print(json.dumps(document, indent=2), file=self.out, flush=True)
        elif human is not None:
            print(human, file=self.out, end="" if human.endswith("\n") else "\n", flush=True)


class Progress:
    """The --wait display: one updating line on a terminal, a plain line per change otherwise."""

    def __init__(self, console: Console, job_id: str) -> None:
        self._console = console
        self._job_id = job_id
        self._started = time.monotonic()
        self._document: StatusDocument | None = None
        self._last_plain: tuple[str, int, tuple[int, int] | None] | None = None
        self._task: TaskID | None = None

    def elapsed(self) -> float:
        """Seconds since the wait began."""
        return time.monotonic() - self._started

    def update(self, document: StatusDocument) -> None:
        """Show a fresh status document."""
        self._document = document
        if self._console.live:
            self._draw()
            return
        # Logs and pipes get a line only when something changed, not one per poll.
        state = (document["status"], document.get("attempts", 0), steps_of(document))
        if state != self._last_plain:
            self._last_plain = state
            self._console.note(progress_line(self._job_id, document, self.elapsed()))

    def pause(self, seconds: float) -> None:
        """Sleep at least `seconds`, ticking the elapsed time on a terminal."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(1.0, left))
            if self._console.live:
                self._draw()

    def tick(self) -> None:
        """Redraw the elapsed time on a terminal (nothing elsewhere)."""
        if self._console.live:
            self._draw()

    def close(self) -> None:
        """Keep the last progress line (or bar) and move below it."""
        bar = self._console.bar
        if bar is not None:
            bar.refresh()
            bar.stop()
            self._console.bar = None
        self._console.end_line()

    def _draw(self) -> None:
        steps = steps_of(self._document)
        if steps is None and self._console.bar is None:
            self._console.redraw(progress_line(self._job_id, self._document, self.elapsed()))
            return
        bar = self._console.bar or self._open_bar()
        completed, total = steps or (0, 1)
        status = self._document["status"] if self._document else "waiting"
        if self._task is not None:
            bar.update(self._task, completed=completed, total=total, status=status)
        bar.refresh()

    def _open_bar(self) -> RichProgress:
        """A multi-step job: rich's progress bar takes over the line (loaded only for such a job)."""
        from rich.console import Console as RichConsole  # noqa: PLC0415 - only a multi-step wait needs it
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn  # noqa: PLC0415
        from rich.progress import Progress as Bar  # noqa: PLC0415

        self._console.end_line()
        bar = Bar(
            TextColumn(f"job {self._job_id}: {{task.fields[status]}}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps"),
            TimeElapsedColumn(),
            console=RichConsole(file=self._console.err),
            auto_refresh=False,
        )
        bar.start()
        self._task = bar.add_task("steps", total=1, status="waiting")
        self._console.bar = bar
        return bar


# --- retries ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Retry:
    """One decision to try a call again: after how long, why, and which retry of how many."""

    delay: float
    reason: str
    number: int
    of: int

    def message(self, what: str) -> str:
        """What the user is told while the command waits."""
        return f"{self.reason}: retrying {what} in {self.delay:.0f} s (retry {self.number} of {self.of})"


@dataclass
class RetryBudget:
    """How many more times a failed call is tried again, and after how long."""

    network: list[int] = field(default_factory=lambda: list(NETWORK_BACKOFF_SECONDS))
    throttled: int = THROTTLE_RETRIES

    def next_retry(self, error: Exception) -> Retry | None:
        """When to try again after `error`, or None to give up."""
        if isinstance(error, ApiError) and error.status == 429:
            if self.throttled <= 0:
                return None
            self.throttled -= 1
            # API Gateway's own throttling sends no Retry-After; the functions' rate_limited does.
            delay = min(error.retry_after or FALLBACK_POLL_SECONDS, MAX_RETRY_DELAY_SECONDS)
            reason = (
                f"rate limited (HTTP 429, asked to wait {error.retry_after} s)"
                if error.retry_after
                else ("rate limited (HTTP 429)")
            )
            return Retry(delay, reason, THROTTLE_RETRIES - self.throttled, THROTTLE_RETRIES)
        if isinstance(error, ApiError) and error.status in RETRYABLE_STATUSES:
            reason = f"the API answered HTTP {error.status}"
        elif isinstance(error, ConnectionLostError):
            reason = f"the connection was lost ({error.reason})"
        else:
            return None
        if not self.network:
            return None
        # A 503's Retry-After, when longer than our backoff, is the server's better guess.
        delay = max(self.network.pop(0), (error.retry_after or 0) if isinstance(error, ApiError) else 0)
        total = len(NETWORK_BACKOFF_SECONDS)
        return Retry(min(delay, MAX_RETRY_DELAY_SECONDS), reason, total - len(self.network), total)


def with_retries[T](console: Console, call: Callable[[], T], what: str, deadline: float | None = None) -> T:
    """Run an idempotent call, trying again (bounded) after a lost connection, a 5xx or a 429.

    With a `deadline` (a time.monotonic() value), a retry that would start after it starts at it
    instead, and a retryable failure at or past it raises WaitTimeoutError rather than waiting on.
    """
    budget = RetryBudget()
    while True:
        try:
            return call()
        except (ApiError, ConnectionLostError) as error:
            retry = budget.next_retry(error)
            if retry is None:
                raise
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeoutError(f"{what} still failed when the time was up ({error})") from error
                retry = replace(retry, delay=min(retry.delay, left))
            console.note(retry.message(what))
            time.sleep(retry.delay)


# --- commands --------------------------------------------------------------------------------


@dataclass
class Session:
    """One command's client and console."""

    client: OutlastClient
    console: Console


def register(commands: Any) -> None:
    """Add submit, status, result, cancel, list, budget and watch."""
    # No abbreviations: `--token eyJ...` must be refused, not taken as `--token-env`.
    common = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    common.add_argument(
        "--api-url",
        metavar="URL",
        help=f"the API's base URL (default: ${API_URL_ENV}, else {DEFAULT_API_URL})",
    )
    common.add_argument(
        "--token-env",
        default=TOKEN_ENV,
        type=variable_name,
        metavar="NAME",
        help=f"environment variable holding the ID token (default {TOKEN_ENV})",
    )
    common.add_argument("--token", action=_RefuseToken, help=argparse.SUPPRESS)
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def add(name: str, help_text: str, run: Callable[[argparse.Namespace, Session], int]) -> Any:
        parser = commands.add_parser(
            name,
            parents=[common],
            help=help_text,
            description=help_text,
            epilog=EXIT_CODES_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=False,
        )
        parser.set_defaults(run=_guarded(run))
        return parser

    from outlast.commands import watch  # noqa: PLC0415 - it builds on this module's helpers

    _submit_arguments(add("submit", "submit a job (safe to retry with the printed idempotency key)", _submit))
    status = add("status", "show a job's status", _status)
    status.add_argument("job_id", metavar="JOB_ID")
    _wait_arguments(status)
    result = add("result", "print a Succeeded job's output", _result)
    result.add_argument("job_id", metavar="JOB_ID")
    cancel = add("cancel", "cancel a job", _cancel)
    cancel.add_argument("job_id", metavar="JOB_ID")
    listing = add("list", "list your jobs, newest first", _list)
    listing.add_argument(
        "--status", choices=STATUSES, metavar="S", help="only jobs in this status: " + ", ".join(STATUSES)
    )
    listing.add_argument(
        "--limit",
        type=page_limit,
        default=20,
        metavar="N",
        help="jobs to show (1-100, default 20); page size with --all",
    )
    listing.add_argument("--all", action="store_true", help="follow nextCursor to the last page")
    listing.add_argument("--cursor", help="start from this nextCursor")
    add("budget", "show your tenant's token budget this month", _budget)
    watching = add("watch", "print your jobs' updates as they happen (one job's, with JOB_ID)", watch.run)
    watching.add_argument("job_id", metavar="JOB_ID", nargs="?", help="only this job, until it ends")


class _RefuseToken(argparse.Action):
    """`--token` exists only to say why it does not: a token in argv lands in shell history and `ps`."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any, **__: Any) -> None:
        parser.error(
            f"the token is read from ${TOKEN_ENV} (or the variable --token-env names), not from argv"
        )


def _submit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("operation", choices=OPERATIONS, metavar="OPERATION", help=", ".join(OPERATIONS))
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="the input text")
    source.add_argument("--file", metavar="PATH", help="read the input text from PATH (UTF-8; - for stdin)")
    parser.add_argument(
        "--label", action="append", dest="labels", metavar="L", help="a label for classify (repeat)"
    )
    parser.add_argument("--model", help="a model from the API's allowlist")
    parser.add_argument("--max-output-tokens", type=int, metavar="N", help="cap on output tokens (1-4096)")
    parser.add_argument(
        "--idempotency-key",
        type=idempotency_key,
        metavar="K",
        help="reuse the key of an earlier submit to get the same job (default: a new UUID)",
    )
    _wait_arguments(parser)


def _wait_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait", action="store_true", help="wait for the job to end (Ctrl-C stops waiting, not the job)"
    )
    parser.add_argument(
        "--timeout", type=positive_seconds, metavar="SECONDS", help="with --wait: give up after this long"
    )


def _guarded(
    command: Callable[[argparse.Namespace, Session], int],
) -> Callable[[argparse.Namespace], int]:
    """Run a command, turning every expected failure into a message and an exit code."""

    def run(arguments: argparse.Namespace) -> int:
        console = Console(json_mode=arguments.json, out=sys.stdout, err=sys.stderr)
        try:
            return command(arguments, Session(_connect(arguments, console), console))
        except UsageError as error:
            console.note(f"error: {error}")
        except ApiError as error:
            for line in format_api_error(error):
                console.note(line)
        except ApiUnreachableError as error:
            hint = "is `outlast local up` running?" if is_loopback(error.url) else "check --api-url"
            console.note(f"error: cannot reach API at {error.url} ({error.reason}): {hint}")
        except ConnectionLostError as error:
            console.note(f"error: lost the connection to the API at {error.url} ({error.reason})")
        except UnexpectedAnswerError as error:
            console.note(f"error: {error}")
        except WaitTimeoutError as error:
            # Only `status --wait` gets here: its first request never got an answer in time.
            console.note(f"timed out: {error}")
            return EXIT_STILL_RUNNING
        except KeyboardInterrupt:
            console.note("interrupted")
            return EXIT_INTERRUPTED
        return EXIT_ERROR

    return run


def _connect(arguments: argparse.Namespace, console: Console) -> OutlastClient:
    api_url = arguments.api_url or os.environ.get(API_URL_ENV) or DEFAULT_API_URL
    token = os.environ.get(arguments.token_env, "").strip()
    if not token:
        raise UsageError(
            f"no token: set ${arguments.token_env} to a Cognito ID token "
            f"(locally: export {arguments.token_env}=$(outlast local token --user NAME))"
        )
    if not is_bearer_token(token):
        # Never echoed: a pasted token is a secret, and a mangled one is most of one.
        raise UsageError(
            f"${arguments.token_env} does not hold a token: it has spaces, line breaks or "
            "characters outside visible ASCII"
        )
    if getattr(arguments, "timeout", None) is not None and not arguments.wait:
        raise UsageError("--timeout only applies with --wait")
    try:
        client = OutlastClient(api_url, token)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if urlsplit(client.api_url).scheme == "http" and not is_loopback(client.api_url):
        console.note(f"warning: sending the token over plain http to {client.api_url}")
    return client


def _read_text(arguments: argparse.Namespace) -> str:
    if arguments.text is not None:
        return str(arguments.text)
    try:
        if arguments.file == "-":
            return sys.stdin.read()
        return Path(arguments.file).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{arguments.file} is not UTF-8 text") from None
    except OSError as error:
        raise UsageError(f"cannot read {arguments.file}: {error.strerror or error}") from None


def _submit(arguments: argparse.Namespace, session: Session) -> int:
    client, console = session.client, session.console
    request = build_submit_request(
        arguments.operation,
        _read_text(arguments),
        arguments.labels,
        arguments.model,
        arguments.max_output_tokens,
    )
    key = arguments.idempotency_key or new_idempotency_key()
    # Said before the request leaves: whatever happens next, the user can retry with this key.
    console.note(f"idempotency key: {key}")
    failures: list[BaseException] = []

    def send() -> Answer[StatusDocument]:
        try:
            return client.submit(request, key)
        except (TransportError, ApiError) as error:
            failures.append(error)
            raise

    try:
        answer = with_retries(console, send, f"the submit with the same idempotency key {key}")
    except (TransportError, ApiError, KeyboardInterrupt) as error:
        # Any attempt may have made the job, not only the last: a refused retry proves nothing.
        if any(submit_may_have_happened(failure) for failure in [*failures, error]):
            console.note(
                f"the job may or may not exist: rerun with --idempotency-key {key} to find out safely"
            )
        raise
    document = answer.document
    if answer.replayed:
        console.note(f"replayed: same job as before (idempotency key {key})")
    status_url = client.url_for(answer.location or f"/v1/jobs/{document['jobId']}")
    if not arguments.wait:
        console.show(
            f"job     {document['jobId']}\nstatus  {document['status']}\nurl     {status_url}", document
        )
        console.note(f"follow it: outlast status {document['jobId']} --wait")
        return EXIT_OK
    console.note(f"job {document['jobId']} ({status_url})")
    # The submit's own retries are bounded by their budget; --timeout is the wait for the job.
    return _wait_and_report(session, answer, _deadline(arguments.timeout))


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _status(arguments: argparse.Namespace, session: Session) -> int:
    deadline = _deadline(arguments.timeout) if arguments.wait else None
    answer = with_retries(
        session.console,
        lambda: session.client.get_job(arguments.job_id),
        "the status request",
        deadline,
    )
    if arguments.wait:
        return _wait_and_report(session, answer, deadline)
    document = answer.document
    session.console.show(format_status(document), document)
    if document["status"] not in TERMINAL_STATUSES:
        seconds = answer.retry_after or FALLBACK_POLL_SECONDS
        session.console.note(f"not finished: check again in {seconds} s, or add --wait")
    elif document["status"] == "Succeeded":
        session.console.note(f"the output: outlast result {document['jobId']}")
    return exit_code_for(document["status"])


@dataclass(frozen=True)
class Waited:
    """Where a wait ended: the last status document, and why it stopped early if it did."""

    document: StatusDocument
    stopped_early: str | None = None


class _TimeUp(Exception):  # noqa: N818 - a signal between the wait's helpers, not an error
    """--wait --timeout ran out between two reads."""


@dataclass
class Followed:
    """The newest status document of one job seen so far, from a GET or a pushed update."""

    document: StatusDocument
    retry_after: int | None = None

    @property
    def terminal(self) -> bool:
        """True once the job ended."""
        return self.document["status"] in TERMINAL_STATUSES

    def read(self, answer: Answer[StatusDocument]) -> None:
        """A GET: the persisted job, the truth."""
        self.document, self.retry_after = answer.document, answer.retry_after

    def offer(self, pushed: StatusDocument) -> bool:
        """A pushed update: taken when it is this job's and newer than what was seen (by revision)."""
        if pushed["jobId"] != self.document["jobId"]:
            return False
        if pushed.get("revision", 0) <= self.document.get("revision", 0):
            return False
        self.document = pushed
        return True


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


def _read(session: Session, followed: Followed, deadline: float | None) -> None:
    job_id = followed.document["jobId"]
    followed.read(
        with_retries(session.console, lambda: session.client.get_job(job_id), "the status request", deadline)
    )


class Display(Protocol):
    """Where a wait shows the job: the --wait progress line, or `watch`'s printed updates."""

    def update(self, document: StatusDocument) -> None:
        """Show a fresh status document."""

    def tick(self) -> None:
        """Time passed with nothing new."""

    def pause(self, seconds: float) -> None:
        """Sleep at least `seconds` (ticking)."""


def follow_socket(
    session: Session, followed: Followed, live: LiveUpdates, deadline: float | None, progress: Display
) -> bool:
    """Follow pushed updates until the job ends; False when the socket failed (the caller polls)."""
    # Read once the socket is open: a change made before it opened cannot be missed.
    _read(session, followed, deadline)
    progress.update(followed.document)
    quiet_since = time.monotonic()
    while not followed.terminal:
        left = _left(deadline)
        if left is not None and left <= 0:
            raise _TimeUp
        if live.due_for_renewal:
            session.console.note("the live connection is near its 2-hour limit: polling instead")
            return False
        # Short slices: the progress line ticks, and a quiet socket is checked with a GET now and then.
        wait = 1.0 if left is None else min(1.0, left)
        try:
            pushed = live.next_update(wait)
        except LiveUpdatesError as error:
            session.console.note(f"live updates stopped ({error}): polling instead")
            return False
        if pushed is not None and followed.offer(pushed):
            quiet_since = time.monotonic()
            progress.update(followed.document)
        elif time.monotonic() - quiet_since >= LIVE_RECHECK_SECONDS:
            # A missed push costs only this much latency: the persisted job is the truth.
            _read(session, followed, deadline)
            quiet_since = time.monotonic()
            progress.update(followed.document)
        else:
            progress.tick()
    # Ended, as pushed: what --wait reports is the job as stored.
    _read(session, followed, deadline)
    progress.update(followed.document)
    return True


def poll_until_ended(session: Session, followed: Followed, deadline: float | None, progress: Display) -> None:
    """Poll until the job ends, sleeping the Retry-After the API asked for."""
    while not followed.terminal:
        delay: float = followed.retry_after or FALLBACK_POLL_SECONDS
        left = _left(deadline)
        if left is not None:
            if left <= 0:
                raise _TimeUp
            # One last, early poll when the time is up: the job may have ended meanwhile.
            delay = min(delay, left)
        progress.pause(delay)
        _read(session, followed, deadline)
        progress.update(followed.document)


def open_live_or_note(session: Session) -> LiveUpdates | None:
    """Live updates when the API offers them; None (said on stderr) when they cannot be had."""
    try:
        return open_live(session.client)
    except LiveUpdatesError as error:
        session.console.note(f"live updates unavailable ({error}): polling")
        return None


def _wait(session: Session, answer: Answer[StatusDocument], deadline: float | None) -> Waited:
    """Follow the job until it ends or the deadline passes: pushed updates when the socket opens,
    polling (Retry-After) otherwise or once it fails."""
    progress = Progress(session.console, answer.document["jobId"])
    followed = Followed(answer.document, answer.retry_after)
    progress.update(followed.document)
    try:
        if not followed.terminal:
            live = open_live_or_note(session)
            if live is not None:
                with live:
                    if follow_socket(session, followed, live, deadline, progress):
                        return Waited(followed.document)
            poll_until_ended(session, followed, deadline, progress)
    except (WaitTimeoutError, _TimeUp):
        return Waited(followed.document, f"timed out after {progress.elapsed():.0f} s")
    except KeyboardInterrupt:
        return Waited(followed.document, "stopped waiting")
    finally:
        progress.close()
    return Waited(followed.document)


def _wait_and_report(session: Session, answer: Answer[StatusDocument], deadline: float | None) -> int:
    console = session.console
    waited = _wait(session, answer, deadline)
    document = waited.document
    job_id, status = document["jobId"], document["status"]
    if waited.stopped_early:
        console.note(
            f"{waited.stopped_early}: job {job_id} is still {status} and goes on without you.\n"
            f"  resume: outlast status {job_id} --wait\n  cancel: outlast cancel {job_id}"
        )
        console.show(None, document)
        return EXIT_STILL_RUNNING
    if status == "Succeeded":
        result = with_retries(console, lambda: session.client.get_result(job_id), "the result request")
        console.show(result.document["output"], result.document)
        return EXIT_OK
    if status == "Failed":
        console.note(
            f"job {job_id} Failed after {document.get('attempts', 0)} attempt(s): {format_error(document)}"
        )
    else:
        console.note(f"job {job_id} was Canceled")
    console.show(None, document)
    return exit_code_for(status)


def _result(arguments: argparse.Namespace, session: Session) -> int:
    answer = with_retries(
        session.console, lambda: session.client.get_result(arguments.job_id), "the result request"
    )
    session.console.show(answer.document["output"], answer.document)
    return EXIT_OK


def _cancel(arguments: argparse.Namespace, session: Session) -> int:
    answer = with_retries(
        session.console, lambda: session.client.cancel(arguments.job_id), "the cancel request"
    )
    document = answer.document
    job_id = document["jobId"]
    if answer.status == 202:
        human = (
            f"job {job_id}: {document['status']}\n"
            "cancellation requested: the job is running and stops at its next check "
            f"(follow it: outlast status {job_id} --wait)"
        )
    else:
        human = f"job {job_id}: {document['status']}\ncanceled: it had not started (or was already canceled)"
    session.console.show(human, document)
    return EXIT_OK


def _pages(session: Session, arguments: argparse.Namespace) -> Iterator[JobPage]:
    """Pages of the list; short pages with a nextCursor are followed, never mistaken for the end."""
    cursor, wanted, seen = arguments.cursor, arguments.limit, {arguments.cursor}
    while True:
        # Without --all, ask only for what is still missing so the last cursor stays exact.
        limit = arguments.limit if arguments.all else wanted
        call = partial(session.client.list_jobs, arguments.status, limit, cursor)
        page = with_retries(session.console, call, "the list request").document
        yield page
        wanted -= len(page["items"])
        cursor = page["nextCursor"]
        if cursor is None or (not arguments.all and wanted <= 0):
            return
        if cursor in seen:
            raise UnexpectedAnswerError("the API sent the same nextCursor twice")
        seen.add(cursor)


def format_budget(document: BudgetDocument) -> str:
    """The tenant's budget, for people."""
    if document["limitTokens"] is None:
        limit, remaining = "no limit", "-"
    else:
        limit, remaining = f"{document['limitTokens']:,} tokens", f"{document['remainingTokens'] or 0:,}"
    return "\n".join(
        [
            f"budget {document['period']} (resets {format_time(document['resetsAt'])})",
            f"  limit      {limit}",
            f"  used       {document['usedTokens']:,}",
            f"  reserved   {document['reservedTokens']:,}  (held by your tenant's jobs until they end)",
            f"  remaining  {remaining}",
        ]
    )


def _budget(_arguments: argparse.Namespace, session: Session) -> int:
    answer = with_retries(session.console, session.client.get_budget, "the budget request")
    session.console.show(format_budget(answer.document), answer.document)
    return EXIT_OK


def _list(arguments: argparse.Namespace, session: Session) -> int:
    items: list[StatusDocument] = []
    cursor: str | None = None
    for page in _pages(session, arguments):
        items += page["items"]
        cursor = page["nextCursor"]
    combined: JobPage = {"items": items, "nextCursor": cursor}
    session.console.show(format_table(items), combined)
    if cursor is not None:
        session.console.note(f"more jobs: add --all, or --cursor {cursor}")
    return EXIT_OK
