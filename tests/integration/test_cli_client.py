"""The `outlast` client commands over real HTTP against a small fake of the outlast API.

The fake (a stdlib HTTP server in this process) implements the documented behaviours the
commands rely on: 202 + Location + Retry-After on submit, replays on a repeated key, status
progressions over successive polls, problem+json errors, API Gateway's plain 401, a list whose
first page is short while nextCursor is set, and injected faults (a dropped POST, a 429, scripted
answers per method). Tests that sleep take `fake_time`, so they check what was asked, not how fast.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

import pytest

from outlast import retry
from outlast.api.http import TERMINAL_STATUSES
from outlast.cli.errors import ExitCode
from tests.support.cli import run

pytestmark = pytest.mark.integration

TOKEN = "header.payload.signature"
OUTPUT = "A short summary."
SCHEMA = {
    "type": "object",
    "properties": {"vendor": {"type": "string"}, "total": {"type": "number"}},
    "required": ["vendor", "total"],
    "additionalProperties": False,
}
EXTRACTED = {"vendor": "Acme", "total": 12.5}
CREATED = "2024-05-01T12:00:00.000Z"
JOB_ERROR = {"code": "content_policy", "message": "The provider refused the input."}
UUID4 = r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"

Reply = tuple[int, dict[str, str], Any]
# A scripted answer: a reply, "drop" (the request arrives, no answer leaves) or "answer" (as usual).
Fault = Reply | Literal["drop", "answer"]
UNAUTHORIZED: Reply = (401, {}, {"message": "Unauthorized"})
# How a submitted job's reads go, by its input text (anything else: Pending, Running, Succeeded).
SCRIPTS = {
    "fail": ["Pending", "Running", "Failed"],
    "cancel": ["Pending", "Canceled"],
    "slow": ["Pending", "Running"],  # never ends
}
BUDGET = {
    "period": "2024-05",
    "limitTokens": 1_000_000,
    "usedTokens": 120_500,
    "reservedTokens": 9_000,
    "remainingTokens": 870_500,
    "resetsAt": "2024-06-01T00:00:00.000Z",
}


def status_document(
    job_id: str, status: str, attempts: int = 1, revision: int = 1, *, stream: bool = False
) -> dict[str, Any]:
    return {
        "stream": stream,
        "jobId": job_id,
        "status": status,
        "operation": "summarize",
        "createdAt": CREATED,
        "updatedAt": CREATED,
        "expiresAt": "2024-05-31T12:00:00.000Z",
        "attempts": 0 if status == "Pending" else attempts,
        "cancelRequestedAt": CREATED if status in {"CancellationRequested", "Canceled"} else None,
        "resultUrl": f"/v1/jobs/{job_id}/result" if status == "Succeeded" else None,
        "error": JOB_ERROR if status == "Failed" else None,
        "usage": {"inputTokens": 10, "outputTokens": 5} if status in {"Succeeded", "Failed"} else None,
        "crashes": 0,
        "revision": revision,
        "progress": {"completedSteps": 1 if status == "Succeeded" else 0, "totalSteps": 1},
        "reservedTokens": None,
    }


def problem(status: int, code: str, title: str, detail: str) -> tuple[int, dict[str, str], Any]:
    body = {
        "type": f"urn:outlast:problem:{code}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
        "correlationId": "corr-" + code,
    }
    return status, {"Content-Type": "application/problem+json"}, body


@dataclass
class Seen:
    """One request as the fake received it."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    at: float


@dataclass
class FakeJob:
    """A job whose successive reads walk through `script`; the last status sticks."""

    job_id: str
    script: list[str]
    position: int = 0
    output: Any = OUTPUT  # an extract job's is a JSON object
    stream: bool = False

    def state(self) -> str:
        return self.script[self.position]

    def read(self) -> dict[str, Any]:
        document = status_document(self.job_id, self.state(), revision=self.position + 1, stream=self.stream)
        self.position = min(self.position + 1, len(self.script) - 1)
        return document

    def events(self) -> list[dict[str, Any]]:
        """Attempt 1 streams OUTPUT word by word; a job that ended without succeeding, half of it."""
        words = [word if n == 0 else " " + word for n, word in enumerate(OUTPUT.split(" "))]
        if self.state() in {"Failed", "Canceled", "CancellationRequested"}:
            words = words[: len(words) // 2]
        return [
            {"jobId": self.job_id, "attempt": 1, "seq": seq, "text": word}
            for seq, word in enumerate(words, start=1)
        ]


@dataclass
class FakeApi:
    """The outlast API's documented behaviours, with faults to inject."""

    drop_posts: int = 0
    throttle_posts: int = 0
    faults: dict[str, list[Fault]] = field(default_factory=dict)  # by method, used up in order
    requests: list[Seen] = field(default_factory=list)
    jobs: dict[str, FakeJob] = field(default_factory=dict)
    keys: dict[str, tuple[str, Any]] = field(default_factory=dict)
    listed: list[dict[str, Any]] = field(
        default_factory=lambda: [
            status_document(str(uuid.uuid4()), status) for status in ("Running", "Failed", "Succeeded")
        ]
    )
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_job(self, *script: str) -> str:
        job_id = str(uuid.uuid4())
        self.jobs[job_id] = FakeJob(job_id, list(script))
        return job_id

    def seen(self, method: str, path_prefix: str = "/v1/jobs") -> list[Seen]:
        return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    def answer(self, request: Seen) -> tuple[int, dict[str, str], Any] | None:
        """The answer to one request; None drops the connection without one."""
        with self.lock:
            self.requests.append(request)
            scripted = self.faults.get(request.method)
            fault = scripted.pop(0) if scripted else "answer"
            if fault != "answer":
                return None if fault == "drop" else fault
            return self._answer(request)

    def _answer(self, request: Seen) -> tuple[int, dict[str, str], Any] | None:
        """The documented behaviour, faults aside."""
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return 401, {"WWW-Authenticate": 'Bearer error="invalid_token"'}, {"message": "Unauthorized"}
        parts = request.path.strip("/").split("/")
        if parts[:2] != ["v1", "jobs"]:
            return (200, {}, BUDGET) if parts == ["v1", "budget"] else (404, {}, {"message": "Not Found"})
        if len(parts) == 2:
            return self._submit(request) if request.method == "POST" else self._list(request)
        job = self.jobs.get(parts[2])
        if job is None:
            return problem(404, "job_not_found", "Job not found", "No job with this id is visible to you.")
        if len(parts) == 3:
            retry = {} if job.state() in TERMINAL_STATUSES else {"Retry-After": "1"}
            return 200, retry, job.read()
        reads = {"output": lambda: self._output(job, request), "result": lambda: self._result(job)}
        return reads.get(parts[3], lambda: self._cancel(job))()

    def _output(self, job: FakeJob, request: Seen) -> tuple[int, dict[str, str], Any]:
        """Every read moves the job on, like a status read; the events after the cursor, a page of 2."""
        job.read()
        attempt, _, seq = request.query.get("after", "0.0").partition(".")
        after = (int(attempt), int(seq))
        events = [e for e in job.events() if (e["attempt"], e["seq"]) > after]
        page, more = events[:2], len(events) > 2  # small pages, so paging is exercised
        complete = job.state() in TERMINAL_STATUSES and not more
        last = (page[-1]["attempt"], page[-1]["seq"]) if page else after
        return (
            200,
            {},
            {
                "events": page,
                "nextCursor": None if complete else f"{last[0]}.{last[1]}",
                "complete": complete,
                "resultAttempt": 1 if complete and job.state() == "Succeeded" else None,
            },
        )

    def _submit(self, request: Seen) -> tuple[int, dict[str, str], Any] | None:
        if self.drop_posts:
            self.drop_posts -= 1
            return None
        if self.throttle_posts:
            self.throttle_posts -= 1
            status, headers, body = problem(429, "rate_limited", "Too many submits", "Try again later.")
            return status, {**headers, "Retry-After": "1"}, body
        key = request.headers["idempotency-key"]
        headers = {"Retry-After": "1"}
        if key in self.keys:
            job_id, body = self.keys[key]
            if body != request.body:
                return problem(409, "idempotency_key_reused", "Idempotency key reused", "Another request.")
            headers["Idempotent-Replayed"] = "true"
        else:
            script = SCRIPTS.get(request.body["input"]["text"], ["Pending", "Running", "Succeeded"])
            job_id = self.add_job(*script)
            if request.body["operation"] == "extract":
                self.jobs[job_id].output = EXTRACTED
            self.jobs[job_id].stream = bool((request.body.get("options") or {}).get("stream"))
            self.keys[key] = (job_id, request.body)
        headers["Location"] = f"/v1/jobs/{job_id}"
        return 202, headers, self.jobs[job_id].read()

    def _result(self, job: FakeJob) -> tuple[int, dict[str, str], Any]:
        if job.state() != "Succeeded":
            return problem(409, "job_not_succeeded", "Job not succeeded", f"The job is {job.state()}.")
        structured = not isinstance(job.output, str)
        return (
            200,
            {},
            {
                "jobId": job.job_id,
                "operation": "extract" if structured else "summarize",
                "output": job.output,
                "outputFormat": "json" if structured else "text",
                "usage": None,
            },
        )

    def _cancel(self, job: FakeJob) -> tuple[int, dict[str, str], Any]:
        state = job.state()
        if state in {"Succeeded", "Failed"}:
            return problem(409, "job_finished", "Job already finished", f"The job is {state}.")
        job.script, job.position = (
            (["Canceled"] if state in {"Pending", "Canceled"} else ["CancellationRequested"]),
            0,
        )
        return (200 if job.state() == "Canceled" else 202), {}, status_document(job.job_id, job.state())

    def _list(self, request: Seen) -> tuple[int, dict[str, str], Any]:
        # The first page is short (one item) whatever the limit, as a filtered read can be.
        offset, limit = int(request.query.get("cursor", "0")), int(request.query.get("limit", "20"))
        take = 1 if offset == 0 else limit
        items = self.listed[offset : offset + take]
        next_cursor = str(offset + take) if offset + take < len(self.listed) else None
        return 200, {}, {"items": items, "nextCursor": next_cursor}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _FakeServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        at = time.monotonic()
        url = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = Seen(
            method=self.command,
            path=url.path,
            query=dict(parse_qsl(url.query)),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=json.loads(raw) if raw else None,
            at=at,
        )
        answer = self.server.fake.answer(request)
        if answer is None:
            self.close_connection = True  # the request arrived; the answer never leaves
            return
        status, headers, body = answer
        payload = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("apigw-requestid", "gw-request-id")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_POST = do_GET


class _FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeApi) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeApi]:
    fake = FakeApi()
    server = _FakeServer(fake)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    monkeypatch.setenv("OUTLAST_API_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("OUTLAST_TOKEN", TOKEN)
    yield fake
    server.shutdown()
    server.server_close()
    thread.join()


@dataclass
class FakeTime:
    """The commands' clock: sleeping moves it at once, and every requested sleep is kept."""

    now: float = 0.0
    slept: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")  # as time.sleep says
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_time(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    # The time module is shared, so the fake API's `Seen.at` reads this clock too.
    fake = FakeTime()
    monkeypatch.setattr(time, "monotonic", fake.monotonic)
    monkeypatch.setattr(time, "sleep", fake.sleep)
    return fake


def one_document(stdout: str) -> Any:
    """stdout parsed as exactly one JSON document (json.loads refuses trailing text)."""
    return json.loads(stdout)


# --- submit ------------------------------------------------------------------------------------


def test_submit_sends_the_contract_body_with_a_new_key_and_the_bearer_token(api, capsys):
    code, out, err = run("submit", "summarize", "--text", "hello")

    assert code == ExitCode.OK
    [post] = api.seen("POST")
    assert post.headers["authorization"] == f"Bearer {TOKEN}"
    assert post.body == {"operation": "summarize", "input": {"text": "hello"}}
    key = post.headers["idempotency-key"]
    assert uuid.UUID(key).version == 4
    assert f"idempotency key: {key}" in err
    [job_id] = api.jobs
    assert job_id in out
    assert f"/v1/jobs/{job_id}" in out
    assert "Pending" in out


def test_submit_sends_options_only_as_given(api, capsys, tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("a ticket about billing", encoding="utf-8")

    code, _, _ = run(
        *("submit", "classify", "--file", str(source), "--label", "billing", "--label", "bug"),
        *("--model", "small", "--max-output-tokens", "50", "--idempotency-key", "order-42"),
    )

    assert code == ExitCode.OK
    [post] = api.seen("POST")
    assert post.headers["idempotency-key"] == "order-42"
    assert post.body == {
        "operation": "classify",
        "input": {"text": "a ticket about billing"},
        "options": {"model": "small", "maxOutputTokens": 50, "labels": ["billing", "bug"]},
    }


def test_submit_reads_stdin_and_prints_one_json_document(api):
    code, out, err = run("submit", "analyze", "--file", "-", "--json", stdin="from a pipe")

    assert code == ExitCode.OK
    document = one_document(out)
    assert document["status"] == "Pending"
    assert document["jobId"] in api.jobs
    assert api.seen("POST")[0].body["input"] == {"text": "from a pipe"}
    assert "idempotency key:" in err


def test_a_repeated_key_is_reported_as_a_replay_of_the_same_job(api, capsys):
    _, first, _ = run("submit", "summarize", "--text", "hi", "--idempotency-key", "k-1", "--json")
    code, second, err = run("submit", "summarize", "--text", "hi", "--idempotency-key", "k-1", "--json")

    assert code == ExitCode.OK
    assert one_document(second)["jobId"] == one_document(first)["jobId"]
    assert "replayed: same job as before" in err
    assert len(api.jobs) == 1


def test_a_key_reused_for_other_input_shows_the_problem(api, capsys):
    run("submit", "summarize", "--text", "one", "--idempotency-key", "k-2")

    code, out, err = run("submit", "summarize", "--text", "two", "--idempotency-key", "k-2", "--json")

    assert code == ExitCode.ERROR
    assert out == ""
    assert "Idempotency key reused" in err
    assert "idempotency_key_reused" in err
    assert "Another request." in err
    assert "corr-idempotency_key_reused" in err


def test_a_dropped_connection_is_retried_with_the_same_key(api, capsys):
    api.drop_posts = 1

    code, out, err = run("submit", "summarize", "--text", "hello", "--json")

    assert code == ExitCode.OK
    first, second = api.seen("POST")
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    assert second.at - first.at >= retry.NETWORK_BACKOFF_SECONDS[0]
    assert "connection was lost" in err
    assert first.headers["idempotency-key"] in err
    assert one_document(out)["jobId"] in api.jobs


def test_a_throttled_submit_waits_the_retry_after_then_succeeds(api, capsys):
    api.throttle_posts = 1

    code, _, err = run("submit", "summarize", "--text", "hello")

    assert code == ExitCode.OK
    first, second = api.seen("POST")
    assert second.at - first.at >= 1
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    assert "rate limited" in err


def test_throttling_is_honoured_a_bounded_number_of_times(api, capsys):
    api.throttle_posts = 10

    code, _, err = run("submit", "summarize", "--text", "hello")

    assert code == ExitCode.ERROR
    assert len(api.seen("POST")) == 1 + retry.THROTTLE_RETRIES
    assert "rate_limited" in err


THROTTLED = problem(429, "rate_limited", "Too many submits", "Try again later.")
BAD_GATEWAY: Reply = (502, {}, {"message": "Bad Gateway"})


@pytest.mark.parametrize("reached", ["drop", BAD_GATEWAY], ids=["lost", "502"])
@pytest.mark.parametrize("refused", [THROTTLED, UNAUTHORIZED], ids=["429", "401"])
def test_a_submit_that_may_have_arrived_keeps_its_warning_when_a_retry_is_refused(
    api, capsys, fake_time, reached, refused
):
    api.faults["POST"] = [reached, refused, refused, refused]

    code, out, err = run("submit", "summarize", "--text", "hello")

    assert code == ExitCode.ERROR
    assert out == ""
    key = api.seen("POST")[0].headers["idempotency-key"]
    assert f"the job may or may not exist: rerun with --idempotency-key {key}" in err


def test_a_submit_refused_every_time_says_no_job_was_made(api, capsys, fake_time):
    api.faults["POST"] = [UNAUTHORIZED]

    code, _, err = run("submit", "summarize", "--text", "hello")

    assert code == ExitCode.ERROR
    assert "may or may not exist" not in err


# --- waiting -----------------------------------------------------------------------------------


def test_submit_wait_polls_no_faster_than_retry_after_and_prints_the_result(api, capsys):
    code, out, err = run("submit", "summarize", "--text", "hello", "--wait")

    assert code == ExitCode.OK
    assert out == OUTPUT + "\n"
    [post] = api.seen("POST")
    job_id = next(iter(api.jobs))
    polls = [r for r in api.seen("GET") if r.path == f"/v1/jobs/{job_id}"]
    assert len(polls) == 2  # Running, then Succeeded
    moments = [post.at] + [poll.at for poll in polls]
    assert all(later - earlier >= 1 for earlier, later in itertools.pairwise(moments))
    assert api.seen("GET", f"/v1/jobs/{job_id}/result")
    assert "Running" in err
    assert "Succeeded" in err


def test_submit_wait_json_prints_only_the_result_document(api, capsys):
    code, out, _ = run("submit", "summarize", "--text", "hello", "--wait", "--json")

    assert code == ExitCode.OK
    assert one_document(out)["output"] == OUTPUT


def test_a_failed_job_exits_1_with_its_error(api, capsys):
    job_id = api.add_job("Running", "Failed")

    code, out, err = run("status", job_id, "--wait", "--json")

    assert code == ExitCode.FAILED
    document = one_document(out)
    assert document["status"] == "Failed"
    assert document["error"] == JOB_ERROR
    assert "content_policy" in err


def test_a_canceled_job_exits_3(api, capsys):
    job_id = api.add_job("CancellationRequested", "Canceled")

    code, out, err = run("status", job_id, "--wait")

    assert code == ExitCode.CANCELED
    assert out == ""
    assert "Canceled" in err


def polls_of(api: FakeApi, job_id: str) -> list[float]:
    """When the fake API was asked for the job's status (on the fake clock)."""
    return [r.at for r in api.seen("GET") if r.path == f"/v1/jobs/{job_id}"]


def test_a_wait_that_times_out_exits_4_and_says_how_to_resume(api, capsys, fake_time):
    job_id = api.add_job("Running")

    code, out, err = run("status", job_id, "--wait", "--timeout", "1.5", "--json")

    assert code == ExitCode.STILL_RUNNING
    assert one_document(out)["status"] == "Running"
    assert f"outlast status {job_id} --wait" in err
    # Retry-After is 1 s: the last poll comes when the time is up, not before or after.
    assert polls_of(api, job_id) == [0, 1, 1.5]


def test_a_wait_polls_once_more_when_the_time_runs_out_before_the_next_retry_after(api, capsys, fake_time):
    job_id = api.add_job("Running", "Running", "Running", "Succeeded")

    code, out, _ = run("status", job_id, "--wait", "--timeout", "2.5")

    assert code == ExitCode.OK
    assert out == OUTPUT + "\n"
    assert polls_of(api, job_id) == [0, 1, 2, 2.5]


def test_the_wait_timeout_also_bounds_the_retries_of_a_failing_poll(api, capsys, fake_time):
    job_id = api.add_job("Running")
    unavailable = problem(503, "service_unavailable", "Unavailable", "Try later.")
    api.faults["GET"] = ["answer", *[(503, {**unavailable[1], "Retry-After": "120"}, unavailable[2])] * 9]

    code, _, err = run("status", job_id, "--wait", "--timeout", "10")

    assert code == ExitCode.STILL_RUNNING
    assert f"outlast status {job_id} --wait" in err
    # Polled at once, after the job's Retry-After, then once more when the 10 s were up.
    assert polls_of(api, job_id) == [0, 1, 10]
    assert sum(fake_time.slept) == pytest.approx(10)


def test_the_wait_timeout_bounds_the_first_status_request_too(api, capsys, fake_time):
    job_id = api.add_job("Running")
    api.faults["GET"] = [(503, {"Retry-After": "120"}, {"message": "Service Unavailable"})] * 9

    code, _, err = run("status", job_id, "--wait", "--timeout", "5")

    assert code == ExitCode.STILL_RUNNING
    assert polls_of(api, job_id) == [0, 5]
    assert "timed out" in err


def test_ctrl_c_stops_waiting_without_canceling(api, capsys, monkeypatch):
    job_id = api.add_job("Running")

    def interrupted(_: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupted)  # fault injection: the user presses Ctrl-C

    code, _, err = run("status", job_id, "--wait")

    assert code == ExitCode.STILL_RUNNING
    assert f"outlast status {job_id} --wait" in err
    assert not api.seen("POST")


# --- status, result, cancel --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [("Running", ExitCode.OK), ("Succeeded", ExitCode.OK), ("Failed", ExitCode.FAILED)],
)
def test_status_shows_the_document_and_exits_by_status(api, capsys, status, expected):
    job_id = api.add_job(status)

    code, out, _ = run("status", job_id)

    assert code == expected
    assert job_id in out
    assert status in out


def test_an_unknown_job_shows_the_problem(api, capsys):
    code, out, err = run("status", str(uuid.uuid4()), "--json")

    assert code == ExitCode.ERROR
    assert out == ""
    for part in (
        "Job not found",
        "No job with this id is visible to you.",
        "job_not_found",
        "corr-job_not_found",
    ):
        assert part in err


def test_a_refused_token_shows_api_gateways_message(api, capsys, monkeypatch):
    monkeypatch.setenv("OUTLAST_TOKEN", "expired")

    code, _, err = run("status", str(uuid.uuid4()))

    assert code == ExitCode.ERROR
    assert "HTTP 401: Unauthorized" in err
    assert api.requests[0].headers["authorization"] == "Bearer expired"


def test_token_env_names_another_variable(api, capsys, monkeypatch):
    monkeypatch.delenv("OUTLAST_TOKEN")
    monkeypatch.setenv("MY_OUTLAST_TOKEN", TOKEN)
    job_id = api.add_job("Running")

    code, _, _ = run("status", job_id, "--token-env", "MY_OUTLAST_TOKEN")

    assert code == ExitCode.OK
    assert api.requests[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_a_missing_token_is_a_usage_error_before_any_request(api, capsys, monkeypatch):
    monkeypatch.delenv("OUTLAST_TOKEN")

    code, _, err = run("list")

    assert code == ExitCode.ERROR
    assert "OUTLAST_TOKEN" in err
    assert not api.requests


def test_result_prints_the_output_or_the_whole_document(api, capsys):
    job_id = api.add_job("Succeeded")

    code, out, _ = run("result", job_id)
    assert (code, out) == (ExitCode.OK, OUTPUT + "\n")

    code, out, _ = run("result", job_id, "--json")
    assert code == ExitCode.OK
    assert one_document(out) == {
        "jobId": job_id,
        "operation": "summarize",
        "output": OUTPUT,
        "outputFormat": "text",
        "usage": None,
    }


def test_an_extract_result_prints_as_indented_json_and_as_the_value_in_the_document(api, tmp_path, capsys):
    # Given an extract job submitted with its schema in a file
    schema_file = tmp_path / "invoice.schema.json"
    schema_file.write_text(json.dumps(SCHEMA))
    code, out, _ = run("submit", "extract", "--text", "Acme, 12.50", "--schema", str(schema_file), "--wait")

    # Then the schema went in options.schema, and the output is the object, indented, on stdout
    assert code == ExitCode.OK
    [post] = api.seen("POST")
    assert post.body["options"] == {"schema": SCHEMA}
    assert out == json.dumps(EXTRACTED, indent=2) + "\n"
    assert json.loads(out) == EXTRACTED

    # And `result --json` prints the document with the object as its output, not a string
    job_id = next(iter(api.jobs))
    code, out, _ = run("result", job_id, "--json")
    assert (code, one_document(out)["output"], one_document(out)["outputFormat"]) == (
        ExitCode.OK,
        EXTRACTED,
        "json",
    )


def test_a_schema_given_inline_is_sent_as_it_is(api, capsys):
    code, _, _ = run("submit", "extract", "--text", "Acme", "--schema", json.dumps(SCHEMA))

    assert code == ExitCode.OK
    assert api.seen("POST")[0].body["options"] == {"schema": SCHEMA}


def test_result_of_an_unfinished_job_is_a_conflict(api, capsys):
    code, _, err = run("result", api.add_job("Running"))

    assert code == ExitCode.ERROR
    assert "job_not_succeeded" in err


def test_cancel_explains_200_and_202(api, capsys):
    code, out, _ = run("cancel", api.add_job("Pending"))
    assert code == ExitCode.OK
    assert "Canceled" in out
    assert "had not started" in out

    running = api.add_job("Running")
    code, out, _ = run("cancel", running, "--json")
    assert code == ExitCode.OK
    assert one_document(out)["status"] == "CancellationRequested"

    code, out, _ = run("cancel", running)
    assert "stops at its next check" in out


def test_cancel_of_a_finished_job_is_a_conflict(api, capsys):
    code, _, err = run("cancel", api.add_job("Succeeded"))

    assert code == ExitCode.ERROR
    assert "job_finished" in err


# --- list ------------------------------------------------------------------------------------


def test_list_all_follows_a_short_page_with_a_cursor(api, capsys):
    code, out, _ = run("list", "--all", "--json", "--status", "Failed")

    assert code == ExitCode.OK
    page = one_document(out)
    assert [item["jobId"] for item in page["items"]] == [item["jobId"] for item in api.listed]
    assert page["nextCursor"] is None
    queries = [r.query for r in api.seen("GET")]
    assert [q.get("cursor") for q in queries] == [None, "1"]
    assert all(q["status"] == "Failed" for q in queries)


def test_list_fills_the_limit_across_short_pages_and_shows_a_table(api, capsys):
    code, out, err = run("list", "--limit", "2")

    assert code == ExitCode.OK
    assert [r.query["limit"] for r in api.seen("GET")] == ["2", "1"]
    lines = out.splitlines()
    assert lines[0].split() == ["JOB", "ID", "STATUS", "OPERATION", "CREATED", "ATTEMPTS", "ERROR"]
    assert api.listed[0]["jobId"] in lines[1]
    assert api.listed[1]["jobId"] in lines[2]
    assert "content_policy" in lines[2]
    assert len(lines) == 3
    assert "--cursor 2" in err


# --- odd answers -----------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("retry_after", ["99999999999999999999", "9" * 5000, "\u00b2", "-1", "1.5"])
def test_an_odd_retry_after_never_crashes_nor_sleeps_for_ages(api, capsys, fake_time, status, retry_after):
    job_id = api.add_job("Running")
    api.faults["GET"] = [(status, {"Retry-After": retry_after}, {"message": "Slow down"})] * 9

    code, _, err = run("status", job_id)

    assert code == ExitCode.ERROR
    assert f"HTTP {status}: Slow down" in err
    assert fake_time.slept
    assert max(fake_time.slept) <= retry.MAX_RETRY_DELAY_SECONDS


# --- connection ------------------------------------------------------------------------------


def test_a_refused_connection_says_how_to_start_the_local_stack(capsys, monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("OUTLAST_TOKEN", TOKEN)

    code, _, err = run("status", str(uuid.uuid4()), "--api-url", f"http://127.0.0.1:{port}")

    assert code == ExitCode.ERROR
    assert f"cannot reach http://127.0.0.1:{port}" in err
    assert "outlast local up" in err
    assert "Traceback" not in err


def test_budget_shows_the_tenants_budget(api, capsys):
    code, out, _ = run("budget")

    assert code == ExitCode.OK
    assert [request.path for request in api.seen("GET", "/v1/budget")] == ["/v1/budget"]
    assert "budget 2024-05 (resets 2024-06-01 00:00:00Z)" in out
    assert "limit      1,000,000 tokens" in out
    assert "reserved   9,000" in out
    assert "remaining  870,500" in out

    code, out, _ = run("budget", "--json")
    assert (code, one_document(out)) == (ExitCode.OK, BUDGET)


def test_a_budget_refusal_shows_the_problem_and_makes_no_job(api, capsys):
    detail = "This job may use up to 9,000 tokens, and 10 of the tenant's 1,000 monthly tokens are left."
    api.faults["POST"] = [problem(403, "budget_exceeded", "The tenant's token budget is exhausted", detail)]

    code, _, err = run("submit", "summarize", "--text", "hello")

    assert code == ExitCode.ERROR
    assert "budget_exceeded" in err
    assert detail in err
    assert len(api.seen("POST")) == 1  # a 403 is not retried


# --- streaming output ----------------------------------------------------------------------------


def test_submit_stream_asks_for_it_and_prints_the_text_as_it_is_written(api, capsys, fake_time):
    code, out, err = run("submit", "summarize", "--text", "hello", "--stream")

    assert code == ExitCode.OK, err
    [post] = api.seen("POST")
    assert post.body["options"] == {"stream": True}
    assert out == OUTPUT + "\n"
    # Read in pages after the last event seen (the fake has no live updates: it polled)
    cursors = [r.query.get("after") for r in api.seen("GET") if r.path.endswith("/output")]
    assert cursors == ["0.0", "1.2"]


def test_submit_stream_of_a_failed_job_prints_what_was_written_and_exits_1(api, capsys, fake_time):
    code, out, err = run("submit", "summarize", "--text", "fail", "--stream")

    assert code == ExitCode.FAILED
    assert out == "A\n"
    assert "Failed" in err


def test_output_prints_the_text_as_far_as_it_is_written(api, capsys):
    job_id = api.add_job("Pending", "Running", "Succeeded")
    api.jobs[job_id].stream = True
    api.jobs[job_id].position = 2

    code, out, _ = run("output", job_id)

    assert code == ExitCode.OK
    assert out == OUTPUT + "\n"


def test_output_json_prints_each_event_once_as_a_json_line(api, capsys):
    job_id = api.add_job("Succeeded")
    api.jobs[job_id].stream = True

    code, out, _ = run("output", job_id, "--json")

    assert code == ExitCode.OK
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(e["seq"], e["text"]) for e in lines] == [(1, "A"), (2, " short"), (3, " summary.")]


def test_output_of_a_job_that_does_not_stream_says_where_its_result_is(api, capsys):
    job_id = api.add_job("Succeeded")

    code, _, err = run("output", job_id)

    assert code == ExitCode.ERROR
    assert f"outlast result {job_id}" in err


def test_output_follow_of_a_canceled_job_prints_what_was_written_and_exits_3(api, capsys, fake_time):
    job_id = api.add_job("Pending", "Running", "Canceled")
    api.jobs[job_id].stream = True

    code, out, _ = run("output", job_id, "--follow")

    assert code == ExitCode.CANCELED
    assert out == "A\n"
