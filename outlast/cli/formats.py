"""How the API's documents read for a person (pure functions, unit tested)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import urlsplit

from outlast.api.http import ApiError
from outlast.api.models import BudgetDocument, ResultDocument, StatusDocument

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
JOB_COLUMNS = ("JOB ID", "STATUS", "OPERATION", "CREATED", "ATTEMPTS", "ERROR")


def format_time(value: datetime | None) -> str:
    """An instant, shorter for a terminal: 2024-05-01 12:00:05Z."""
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def format_output(document: ResultDocument) -> str:
    """A result's output as people read it: text as it is, an extract job's JSON object indented
    (still JSON: `outlast result ID > out.json` writes a file any JSON reader takes)."""
    if isinstance(document.output, str):
        return document.output
    return json.dumps(document.output, indent=2, ensure_ascii=False)


def format_error(document: StatusDocument) -> str:
    """`code: message` of a failed job, or '-'."""
    error = document.error
    return f"{error.code}: {error.message}" if error else "-"


def error_code(document: StatusDocument) -> str:
    """The failed job's error code, or '-'."""
    return document.error.code if document.error else "-"


def format_status(document: StatusDocument) -> str:
    """A status document as aligned `name  value` lines."""
    rows = [
        ("job", document.job_id),
        ("status", document.status),
        ("operation", document.operation),
        ("attempts", str(document.attempts)),
        ("created", format_time(document.created_at)),
        ("updated", format_time(document.updated_at)),
        ("expires", format_time(document.expires_at)),
    ]
    steps = steps_of(document)
    if steps:
        rows.append(("steps", f"{steps[0]}/{steps[1]} checkpointed"))
    if document.cancel_requested_at:
        rows.append(("cancel requested", format_time(document.cancel_requested_at)))
    if document.error:
        rows.append(("error", format_error(document)))
    if document.usage:
        usage = document.usage
        rows.append(("usage", f"{usage.input_tokens} input tokens, {usage.output_tokens} output tokens"))
    if document.reserved_tokens:
        rows.append(("reserved", f"{document.reserved_tokens} tokens of the tenant's budget, until settled"))
    if document.result_url:
        rows.append(("result", document.result_url))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)


def job_row(document: StatusDocument) -> tuple[str, ...]:
    """One job as a row of JOB_COLUMNS."""
    return (
        document.job_id,
        document.status,
        document.operation,
        format_time(document.created_at),
        str(document.attempts),
        error_code(document),
    )


def format_update(document: StatusDocument) -> str:
    """One line of `outlast watch`: when, which job, its status, attempts, revision (and error code)."""
    line = (
        f"{format_time(document.updated_at)}  {document.job_id}  {document.status:<21}  "
        f"attempts {document.attempts}  revision {document.revision}"
    )
    return line + (f"  {error_code(document)}" if document.error else "")


def steps_of(document: StatusDocument | None) -> tuple[int, int] | None:
    """(completed, total) steps of a job planned in more than one, else None."""
    if document is None or document.progress.total_steps <= 1:
        return None
    return document.progress.completed_steps, document.progress.total_steps


def progress_line(job_id: str, document: StatusDocument | None, elapsed: float) -> str:
    """One line of --wait progress: status, attempts, steps (of a multi-step job) and time spent."""
    if document is None:
        return f"job {job_id}: waiting, {elapsed:.0f} s elapsed"
    steps = steps_of(document)
    done = f", steps {steps[0]}/{steps[1]}" if steps else ""
    return f"job {job_id}: {document.status}, attempts {document.attempts}{done}, {elapsed:.0f} s elapsed"


def format_budget(document: BudgetDocument) -> str:
    """The tenant's budget, for people."""
    if document.limit_tokens is None:
        limit, remaining = "no monthly limit", "-"
    else:
        limit, remaining = f"{document.limit_tokens:,} tokens", f"{document.remaining_tokens or 0:,}"
    return "\n".join(
        [
            f"budget {document.period} (resets {format_time(document.resets_at)})",
            f"  limit      {limit}",
            f"  used       {document.used_tokens:,}",
            f"  reserved   {document.reserved_tokens:,}  (held by your tenant's jobs until they end)",
            f"  remaining  {remaining}",
        ]
    )


def format_api_error(error: ApiError) -> list[str]:
    """An HTTP error for a person: the problem's title, detail, code and correlation id, or the message."""
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
        return ["the token was refused: sign in again (`outlast login`), or check $OUTLAST_TOKEN"]
    if status == 404:
        return ["no such route: is --api-url the outlast API?"]
    return []


def is_loopback(api_url: str) -> bool:
    """True when the API runs on this machine (the local stack)."""
    return (urlsplit(api_url).hostname or "") in LOOPBACK_HOSTS
