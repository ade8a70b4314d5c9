"""The client commands' pure parts: exit codes, formatting, argument checks and retry decisions."""

from __future__ import annotations

import errno
import http.client
import io
import json
import socket
import urllib.error
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from outlast import retry
from outlast.api.http import (
    MAX_RETRY_AFTER_SECONDS,
    Answer,
    ApiError,
    ApiUnreachableError,
    ConnectionLostError,
    HttpApi,
    classify_connection_error,
    parse_retry_after,
)
from outlast.api.models import ResultDocument, StatusDocument
from outlast.cli import formats, jobs
from outlast.cli.console import Console, plain_table
from outlast.cli.errors import CliError, ExitCode
from outlast.cli.progress import Progress
from tests.support.cli import run

JOB_ID = "0b7f3c1e-8a4d-4e2b-9c6f-1d2e3f4a5b6c"


def status_document(status: str = "Running", **changes: Any) -> StatusDocument:
    document: dict[str, Any] = {
        "jobId": JOB_ID,
        "status": status,
        "operation": "summarize",
        "createdAt": "2024-05-01T12:00:05.123Z",
        "updatedAt": "2024-05-01T12:00:09.000Z",
        "expiresAt": "2024-05-31T12:00:05.123Z",
        "attempts": 1,
        "cancelRequestedAt": None,
        "resultUrl": None,
        "error": None,
        "usage": None,
        "crashes": 0,
        "revision": 1,
        "progress": {"completedSteps": 0, "totalSteps": 1},
        "reservedTokens": None,
    }
    document.update(changes)
    return StatusDocument.model_validate(document)


def api_error(status: int, body: Any, headers: dict[str, str] | None = None, text: str = "") -> ApiError:
    return ApiError(status, headers or {}, body, text or json.dumps(body))


def problem(status: int, code: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": f"urn:outlast:problem:{code}",
        "title": "Something went wrong",
        "status": status,
        "detail": "What to do about it.",
        "code": code,
        "correlationId": "corr-1",
        **extra,
    }


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


# --- exit codes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("Succeeded", 0),
        ("Failed", 1),
        ("Canceled", 3),
        ("Pending", 0),
        ("Running", 0),
        ("CancellationRequested", 0),
    ],
)
def test_exit_code_reports_the_job_status(status, code):
    assert jobs.exit_code_for(status) == code


@pytest.mark.parametrize(
    ("error", "may_exist"),
    [
        (ConnectionLostError("http://api", "timed out"), True),
        (ApiUnreachableError("http://api", "Connection refused"), False),
        (api_error(503, problem(503, "service_unavailable")), True),
        (api_error(400, problem(400, "invalid_request")), False),
        (KeyboardInterrupt(), True),
    ],
)
def test_a_failed_submit_may_have_created_the_job_unless_it_surely_did_not(error, may_exist):
    assert jobs.submit_may_have_happened(error) is may_exist


# --- arguments -------------------------------------------------------------------------------


def test_submit_request_holds_options_only_when_given():
    def body(request: Any) -> dict[str, Any]:
        dumped: dict[str, Any] = request.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped

    assert body(jobs.build_submit_request("summarize", "text", (), None, None)) == {
        "operation": "summarize",
        "input": {"text": "text"},
    }
    assert body(jobs.build_submit_request("classify", "t", ("a", "b"), "small", 64)) == {
        "operation": "classify",
        "input": {"text": "t"},
        "options": {"model": "small", "maxOutputTokens": 64, "labels": ["a", "b"]},
    }


def test_an_extract_request_carries_its_schema_as_options_schema():
    schema = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}

    request = jobs.build_submit_request("extract", "t", (), None, None, schema=schema)

    assert request.model_dump(mode="json", by_alias=True, exclude_none=True)["options"] == {"schema": schema}


def test_a_schema_is_read_inline_or_from_a_file_and_must_be_a_json_object(tmp_path):
    path = tmp_path / "schema.json"
    path.write_text('{"type": "object"}')

    assert jobs.read_schema(None) is None
    assert jobs.read_schema(' {"type": "object"}') == {"type": "object"}
    assert jobs.read_schema(str(path)) == {"type": "object"}
    with pytest.raises(CliError, match="not JSON"):
        jobs.read_schema("{type: object}")
    path.write_text("[1, 2]")
    with pytest.raises(CliError, match="must be a JSON object"):
        jobs.read_schema(str(path))
    with pytest.raises(CliError, match="cannot read the schema"):
        jobs.read_schema(str(tmp_path / "missing.json"))


def test_an_extract_output_is_printed_as_indented_json_and_text_as_it_is():
    def result(output: Any, operation: str, output_format: str) -> ResultDocument:
        return ResultDocument.model_validate(
            {
                "jobId": JOB_ID,
                "operation": operation,
                "output": output,
                "outputFormat": output_format,
                "usage": None,
            }
        )

    assert formats.format_output(result("A summary.", "summarize", "text")) == "A summary."
    assert formats.format_output(result({"vendor": "Äcme", "n": [1]}, "extract", "json")) == (
        '{\n  "vendor": "Äcme",\n  "n": [\n    1\n  ]\n}'
    )


def test_a_request_the_contract_refuses_is_a_usage_error_before_any_request():
    with pytest.raises(CliError, match=r"input\.text"):
        jobs.build_submit_request("summarize", "", (), None, None)


def test_a_new_idempotency_key_is_a_uuid4_each_time():
    first, second = jobs.new_idempotency_key(), jobs.new_idempotency_key()
    assert uuid.UUID(first).version == 4
    assert first != second


# Arguments are checked before any token or request: these run with no token at all.


@pytest.mark.parametrize("key", ["", "x" * 256, "has space", "tab\t", "caf\u00e9"])
def test_other_idempotency_keys_are_refused(key):
    code, _, err = run("submit", "summarize", "--text", "t", "--idempotency-key", key)

    assert code == ExitCode.ERROR
    assert "1-255 visible ASCII" in err


@pytest.mark.parametrize("value", ["0", "101", "ten", "2.5"])
def test_the_list_limit_is_1_to_100(value):
    code, _, err = run("list", "--limit", value)

    assert code == ExitCode.ERROR
    assert "--limit" in err


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_timeout_must_be_positive_seconds(value):
    code, _, err = run("status", JOB_ID, "--wait", "--timeout", value)

    assert code == ExitCode.ERROR
    assert "--timeout" in err


@pytest.mark.parametrize("option", ["--token", "--token-env"])
def test_the_token_is_never_a_command_line_argument_nor_echoed(option):
    code, out, err = run("status", JOB_ID, option, "eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl")

    assert code == ExitCode.ERROR
    assert "eyJ" not in out + err


@pytest.mark.parametrize(
    "argv", [["submit", "summarize"], ["submit", "summarize", "--text", "a", "--file", "b"]]
)
def test_submit_needs_exactly_one_input(argv):
    code, _, err = run(*argv)

    assert code == ExitCode.ERROR
    assert "--text" in err


# --- formatting ------------------------------------------------------------------------------


def test_times_are_shortened_to_the_second_in_utc():
    assert formats.format_time(datetime(2024, 5, 1, 12, 0, 5, 123_000, tzinfo=UTC)) == "2024-05-01 12:00:05Z"
    assert formats.format_time(None) == "-"


def test_status_shows_error_usage_and_result_only_when_present():
    running = formats.format_status(status_document("Running"))
    assert "status     Running" in running
    assert "error" not in running
    assert "usage" not in running

    failed = formats.format_status(
        status_document(
            "Failed",
            error={"code": "content_policy", "message": "Refused."},
            usage={"inputTokens": 12, "outputTokens": 0},
        )
    )
    assert "content_policy: Refused." in failed
    assert "12 input tokens, 0 output tokens" in failed


def test_the_table_has_a_header_and_one_aligned_row_per_job():
    failed = status_document("Failed", error={"code": "retries_exhausted", "message": "Gave up."}, attempts=3)
    rows = [formats.job_row(status_document("Running")), formats.job_row(failed)]
    table = plain_table(formats.JOB_COLUMNS, rows)

    assert table[0].split() == ["JOB", "ID", "STATUS", "OPERATION", "CREATED", "ATTEMPTS", "ERROR"]
    assert table[1].split() == [JOB_ID, "Running", "summarize", "2024-05-01", "12:00:05Z", "1", "-"]
    assert table[2].split()[-2:] == ["3", "retries_exhausted"]
    assert table[1].index("summarize") == table[0].index("OPERATION")


def test_on_a_terminal_the_table_is_riches_with_the_same_cells():
    out = FakeTerminal()

    Console(json_mode=False, out=out).table(
        formats.JOB_COLUMNS, [formats.job_row(status_document("Running"))]
    )

    assert "JOB ID" in out.getvalue()
    assert "Running" in out.getvalue()


def test_a_problem_shows_title_detail_code_params_and_correlation_id():
    error = api_error(
        400, problem(400, "invalid_request", invalidParams=[{"name": "options.labels", "reason": "required"}])
    )
    assert formats.format_api_error(error) == [
        "error: Something went wrong (HTTP 400, invalid_request)",
        "  What to do about it.",
        "  - options.labels: required",
        "  correlation id: corr-1",
    ]


def test_api_gateways_own_answers_show_their_message_and_request_id():
    lines = formats.format_api_error(api_error(401, {"message": "Unauthorized"}, {"apigw-requestid": "gw-1"}))

    assert lines[0] == "error: HTTP 401: Unauthorized"
    assert "outlast login" in lines[1]
    assert lines[-1] == "  correlation id: gw-1"
    assert formats.format_api_error(api_error(429, {"message": "Too Many Requests"})) == [
        "error: HTTP 429: Too Many Requests"
    ]


def test_a_body_that_is_not_json_is_shown_briefly():
    error = ApiError(502, {}, None, "<html>\n  Bad   gateway " + "x" * 500)

    [line] = formats.format_api_error(error)
    assert line.startswith("error: HTTP 502: <html> Bad gateway x")
    assert len(line) < 240


def test_progress_line_says_status_attempts_and_elapsed():
    assert formats.progress_line(JOB_ID, status_document("Running", attempts=2), 12.4) == (
        f"job {JOB_ID}: Running, attempts 2, 12 s elapsed"
    )
    assert formats.progress_line(JOB_ID, None, 0) == f"job {JOB_ID}: waiting, 0 s elapsed"


def test_loopback_urls_are_the_local_stack():
    assert formats.is_loopback("http://127.0.0.1:8000")
    assert formats.is_loopback("http://localhost:9000/")
    assert not formats.is_loopback("https://abc.execute-api.eu-west-1.amazonaws.com")


# --- output streams --------------------------------------------------------------------------


def test_json_mode_prints_only_the_document_on_stdout():
    out, err = io.StringIO(), io.StringIO()
    console = Console(json_mode=True, out=out, err=err)

    console.note("idempotency key: k")
    console.show("human text", {"jobId": JOB_ID})

    assert json.loads(out.getvalue()) == {"jobId": JOB_ID}
    assert err.getvalue() == "idempotency key: k\n"


def test_human_mode_prints_the_text_once_with_one_newline():
    out = io.StringIO()
    console = Console(json_mode=False, out=out, err=io.StringIO())

    console.show("line\n", {})
    console.show(None, {})

    assert out.getvalue() == "line\n"


def test_progress_on_a_terminal_is_one_updating_line():
    err = FakeTerminal()
    console = Console(json_mode=False, out=io.StringIO(), err=err)
    progress = Progress(console, JOB_ID)

    progress.update(status_document("Pending", attempts=0), {})
    progress.update(status_document("Running"), {})
    progress.close()
    console.note("done")

    text = err.getvalue()
    assert text.count("\r") == 2
    assert text.count("\n") == 2  # the progress line ends once, then the note
    assert "Running" in text.split("\r")[-1]


def test_progress_of_a_multi_step_job_on_a_terminal_is_a_bar_of_its_steps():
    err = FakeTerminal()
    console = Console(json_mode=False, out=io.StringIO(), err=err)
    progress = Progress(console, JOB_ID)

    progress.update(
        status_document("Pending", attempts=0, progress={"completedSteps": 0, "totalSteps": 9}), {}
    )
    progress.update(status_document("Running", progress={"completedSteps": 3, "totalSteps": 9}), {})
    console.note("a note above the bar")
    progress.update(status_document("Succeeded", progress={"completedSteps": 9, "totalSteps": 9}), {})
    progress.close()

    text = err.getvalue()
    assert "3/9" in text
    assert "9/9" in text
    assert "a note above the bar" in text
    assert console.bar is None  # closed: later output is plain again


def test_a_one_step_job_keeps_the_plain_line():
    err = FakeTerminal()
    console = Console(json_mode=False, out=io.StringIO(), err=err)
    progress = Progress(console, JOB_ID)

    progress.update(status_document("Running", progress={"completedSteps": 0, "totalSteps": 1}), {})

    assert console.bar is None
    assert "steps" not in err.getvalue()


def test_progress_elsewhere_prints_a_line_per_step_of_a_multi_step_job():
    err = io.StringIO()
    progress = Progress(Console(json_mode=False, out=io.StringIO(), err=err), JOB_ID)

    for done in (1, 2, 2):
        progress.update(status_document("Running", progress={"completedSteps": done, "totalSteps": 4}), {})

    lines = err.getvalue().splitlines()
    assert [line.split("steps ")[1].split(",")[0] for line in lines] == ["1/4", "2/4"]


def test_progress_elsewhere_prints_a_line_per_change_only():
    err = io.StringIO()
    progress = Progress(Console(json_mode=False, out=io.StringIO(), err=err), JOB_ID)

    for document in (
        status_document("Pending", attempts=0),
        status_document("Running"),
        status_document("Running"),
    ):
        progress.update(document, {})

    lines = err.getvalue().splitlines()
    assert len(lines) == 2
    assert "\r" not in err.getvalue()


# --- retries ---------------------------------------------------------------------------------


def test_retry_after_is_whole_seconds_never_below_one():
    assert parse_retry_after("3") == 3
    assert parse_retry_after(" 1 ") == 1
    assert parse_retry_after("0") == 1
    assert parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "1.5", "-1", "", " "])
def test_a_retry_after_that_is_not_ascii_digits_is_ignored(value):
    assert parse_retry_after(value) is None


@pytest.mark.parametrize("value", ["99999999999999999999", "9" * 5000, "00000000003601"])
def test_a_huge_retry_after_is_capped_not_a_crash(value):
    assert parse_retry_after(value) == MAX_RETRY_AFTER_SECONDS
    assert parse_retry_after("0000000000007") == 7


def test_answers_say_when_they_replay():
    assert Answer(202, {"idempotent-replayed": "true"}, {}, None).replayed
    assert not Answer(202, {}, {}, None).replayed
    assert Answer(200, {"retry-after": "4"}, {}, None).retry_after == 4


def test_429_is_retried_twice_after_the_retry_after_or_the_fallback():
    budget = retry.RetryBudget()

    first = budget.next_retry(api_error(429, problem(429, "rate_limited"), {"retry-after": "5"}))
    second = budget.next_retry(api_error(429, {"message": "Too Many Requests"}))

    assert first is not None
    assert (first.delay, first.number, first.of) == (5, 1, 2)
    assert second is not None
    assert second.delay == retry.FALLBACK_POLL_SECONDS
    assert budget.next_retry(api_error(429, {"message": "Too Many Requests"})) is None


def test_lost_connections_and_5xx_share_a_bounded_backoff():
    budget = retry.RetryBudget()
    lost = ConnectionLostError("http://api", "Remote end closed connection without response")

    delays = [budget.next_retry(lost), budget.next_retry(api_error(502, None)), budget.next_retry(lost)]

    assert [each.delay for each in delays if each] == list(retry.NETWORK_BACKOFF_SECONDS)
    assert budget.next_retry(lost) is None


def test_a_503_retry_after_longer_than_the_backoff_wins():
    decision = retry.RetryBudget().next_retry(
        api_error(503, problem(503, "service_unavailable"), {"retry-after": "7"})
    )

    assert decision is not None
    assert decision.delay == 7
    assert "retrying the submit in 7 s (retry 1 of 3)" in decision.message("the submit")


@pytest.mark.parametrize("status", [429, 503])
def test_retries_wait_no_longer_than_the_cap_whatever_the_server_asks(status):
    error = api_error(status, {"message": "Slow down"}, {"retry-after": str(MAX_RETRY_AFTER_SECONDS)})

    decision = retry.RetryBudget().next_retry(error)

    assert decision is not None
    assert decision.delay == retry.MAX_RETRY_DELAY_SECONDS


@pytest.mark.parametrize(
    "error",
    [
        api_error(400, problem(400, "invalid_request")),
        api_error(404, problem(404, "job_not_found")),
        api_error(409, problem(409, "idempotency_key_reused")),
        ApiUnreachableError("http://api", "Connection refused"),
    ],
)
def test_definite_answers_are_not_retried(error):
    assert retry.RetryBudget().next_retry(error) is None


# --- the client's pure parts -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind", "reason"),
    [
        (
            urllib.error.URLError(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")),
            ApiUnreachableError,
            "Connection refused",
        ),
        (
            urllib.error.URLError(socket.gaierror(socket.EAI_NONAME, "Name or service not known")),
            ApiUnreachableError,
            "unknown host",
        ),
        (
            http.client.RemoteDisconnected("Remote end closed connection without response"),
            ConnectionLostError,
            "Remote end closed",
        ),
        (urllib.error.URLError(TimeoutError("timed out")), ConnectionLostError, "timed out"),
        (http.client.InvalidURL("nonnumeric port: 'abc'"), ApiUnreachableError, "invalid URL"),
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), ConnectionLostError, "reset"),
    ],
)
def test_connection_failures_are_sorted_into_never_sent_and_maybe_sent(error, kind, reason):
    classified = classify_connection_error("http://api", error)

    assert type(classified) is kind
    assert reason in classified.reason
    assert classified.url == "http://api"


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://host", "127.0.0.1:8000", "http://"])
def test_the_client_only_speaks_http_and_https(url):
    with pytest.raises(ValueError, match="http"):
        HttpApi(url, "token")


def test_locations_resolve_against_the_api_url():
    client = HttpApi("https://api.example.com/", "token")

    assert client.api_url == "https://api.example.com"
    assert client.url_for(f"/v1/jobs/{JOB_ID}") == f"https://api.example.com/v1/jobs/{JOB_ID}"
