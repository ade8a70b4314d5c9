"""The local model server, driven by the real openai SDK over a real socket."""

from __future__ import annotations

import hashlib
import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from outlast.local.model_server import MAX_BODY_BYTES, ModelServer
from shared.contract import Operation
from shared.prompts import template_for

pytestmark = pytest.mark.integration

MODEL = "gpt-4o-mini"
TEXT = "The invoice was paid twice. Please refund the second payment. Thanks for the quick help!"
LABELS = ("billing", "shipping", "technical")


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def client_for(server: ModelServer, timeout: float = 10.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="local", max_retries=0, timeout=timeout)


def messages(operation: Operation, text: str, labels: tuple[str, ...] | None = None) -> list[dict[str, str]]:
    return template_for(operation).render(text, labels)


def ask(client: openai.OpenAI, chat: list[dict[str, str]], **options: Any) -> str:
    completion = client.chat.completions.create(model=MODEL, messages=chat, **options)  # type: ignore[arg-type]
    return completion.choices[0].message.content or ""


def control(server: ModelServer, method: str, path: str) -> Any:
    """Call one of the test-only endpoints (/_calls, /_faults/reset, /_calls/reset)."""
    connection = connect(server)
    try:
        connection.request(method, path, body=b"" if method == "POST" else None)
        response = connection.getresponse()
        assert response.status == 200
        return json.load(response)
    finally:
        connection.close()


def connect(server: ModelServer) -> http.client.HTTPConnection:
    address = urllib.parse.urlsplit(server.url)
    return http.client.HTTPConnection(address.hostname or "", address.port, timeout=10)


def test_each_operation_answers_deterministically_with_usage(server: ModelServer) -> None:
    # Given one client and the worker's prompts
    client = client_for(server)
    for operation in (Operation.SUMMARIZE, Operation.ANALYZE):
        chat = messages(operation, TEXT)

        # When the same prompt is sent twice
        first = client.chat.completions.create(model=MODEL, messages=chat)  # type: ignore[arg-type]
        second = client.chat.completions.create(model=MODEL, messages=chat)  # type: ignore[arg-type]

        # Then the answers match, and usage is reported
        assert first.choices[0].message.content == second.choices[0].message.content
        assert first.choices[0].finish_reason == "stop"
        assert first.model == MODEL
        assert first.usage is not None
        assert first.usage.prompt_tokens > 0
        assert first.usage.completion_tokens > 0
        assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens


def test_summarize_is_built_from_the_document(server: ModelServer) -> None:
    summary = ask(client_for(server), messages(Operation.SUMMARIZE, TEXT))

    assert summary == "The invoice was paid twice. Please refund the second payment."


def test_analyze_reports_facts_of_the_document(server: ModelServer) -> None:
    analysis = ask(client_for(server), messages(Operation.ANALYZE, TEXT + " A refund, quickly."))

    assert analysis.splitlines() == [
        "Words: 18",
        "Sentences: 4",
        "Most frequent words: refund (2), help (1), invoice (1), paid (1), payment (1)",
    ]


def test_classify_answers_a_label_named_in_the_text(server: ModelServer) -> None:
    label = ask(client_for(server), messages(Operation.CLASSIFY, "A billing question: " + TEXT, LABELS))

    assert label == "billing"


def test_classify_answers_one_of_the_labels_when_none_is_named(server: ModelServer) -> None:
    client = client_for(server)
    chat = messages(Operation.CLASSIFY, TEXT, ("red", "green", "blue"))

    answers = {ask(client, chat) for _ in range(3)}

    assert len(answers) == 1
    assert answers <= {"red", "green", "blue"}


def test_max_tokens_truncates_the_answer(server: ModelServer) -> None:
    completion = client_for(server).chat.completions.create(
        model=MODEL,
        messages=messages(Operation.SUMMARIZE, TEXT),  # type: ignore[arg-type]
        max_completion_tokens=4,
    )

    assert len((completion.choices[0].message.content or "").split()) == 3
    assert completion.choices[0].finish_reason == "length"


def test_models_are_listed(server: ModelServer) -> None:
    models = [model.id for model in client_for(server).models.list()]

    assert MODEL in models


def test_rate_limit_fails_n_times_with_retry_after_then_succeeds(server: ModelServer) -> None:
    client = client_for(server)
    chat = messages(Operation.SUMMARIZE, "[[fault:rate_limit*2]] " + TEXT)

    for _ in range(2):
        with pytest.raises(openai.RateLimitError) as raised:
            ask(client, chat)
        assert raised.value.code == "rate_limit_exceeded"
        assert raised.value.response.headers["retry-after"] == "1"
        assert raised.value.response.headers["retry-after-ms"] == "1000"

    assert ask(client, chat).startswith("The invoice was paid twice.")


def test_server_error_fails_once_then_succeeds(server: ModelServer) -> None:
    client = client_for(server)
    chat = messages(Operation.ANALYZE, "[[fault:server_error*1]] " + TEXT)

    with pytest.raises(openai.InternalServerError) as raised:
        ask(client, chat)

    assert raised.value.status_code == 500
    assert ask(client, chat).startswith("Words:")


def test_timeout_stalls_until_the_client_gives_up_then_succeeds(server: ModelServer) -> None:
    client = client_for(server, timeout=0.5)
    chat = messages(Operation.SUMMARIZE, "[[fault:timeout*1]] " + TEXT)

    with pytest.raises(openai.APITimeoutError):
        ask(client, chat)

    assert ask(client, chat).startswith("The invoice")


@pytest.mark.parametrize(
    ("directive", "code"),
    [("context_length", "context_length_exceeded"), ("content_policy", "content_policy_violation")],
)
def test_terminal_faults_fail_every_time(server: ModelServer, directive: str, code: str) -> None:
    client = client_for(server)
    chat = messages(Operation.SUMMARIZE, f"[[fault:{directive}]] " + TEXT)

    for _ in range(3):
        with pytest.raises(openai.BadRequestError) as raised:
            ask(client, chat)
        assert raised.value.code == code
        assert raised.value.type == "invalid_request_error"


def test_delay_holds_the_answer(server: ModelServer) -> None:
    client = client_for(server)
    chat = messages(Operation.SUMMARIZE, "[[delay:0.5]] " + TEXT)

    started = time.monotonic()
    ask(client, chat)

    assert time.monotonic() - started >= 0.5
    [call] = control(server, "GET", "/_calls")
    assert call["finished"] - call["started"] >= 0.5


def test_faults_reset_restarts_the_counters(server: ModelServer) -> None:
    # Given a rate limit fault already used up
    client = client_for(server)
    chat = messages(Operation.SUMMARIZE, "[[fault:rate_limit*1]] " + TEXT)
    with pytest.raises(openai.RateLimitError):
        ask(client, chat)
    ask(client, chat)

    # When the counters are reset
    control(server, "POST", "/_faults/reset")

    # Then the fault fires again
    with pytest.raises(openai.RateLimitError):
        ask(client, chat)


def test_counted_faults_run_in_the_order_written(server: ModelServer) -> None:
    client = client_for(server)
    chat = messages(Operation.SUMMARIZE, "[[fault:server_error*1]] [[fault:rate_limit*1]] " + TEXT)

    with pytest.raises(openai.InternalServerError):
        ask(client, chat)
    with pytest.raises(openai.RateLimitError):
        ask(client, chat)
    assert ask(client, chat)


def test_calls_record_each_call_keyed_by_the_messages_hash(server: ModelServer) -> None:
    # Given one failed and one successful call of the same messages
    client = client_for(server)
    chat = messages(Operation.CLASSIFY, "[[fault:rate_limit*1]] " + TEXT, LABELS)
    with pytest.raises(openai.RateLimitError):
        ask(client, chat)
    ask(client, chat)

    # When the call log is read
    calls = control(server, "GET", "/_calls")

    # Then both calls are there, keyed by the SHA-256 of the canonical JSON of the messages
    canonical = json.dumps(chat, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    expected_hash = hashlib.sha256(canonical.encode()).hexdigest()
    assert [(c["outcome"], c["status"]) for c in calls] == [("rate_limit", 429), ("ok", 200)]
    assert {c["requestHash"] for c in calls} == {expected_hash}
    assert {c["model"] for c in calls} == {MODEL}
    assert {c["operation"] for c in calls} == {"classify"}
    assert all(c["started"] <= c["finished"] for c in calls)

    # And the log can be cleared on its own
    control(server, "POST", "/_calls/reset")
    assert control(server, "GET", "/_calls") == []


def test_concurrent_calls_overlap(server: ModelServer) -> None:
    # Given five different prompts that each hold the answer for a while
    client = client_for(server)
    chats = [messages(Operation.SUMMARIZE, f"[[delay:1]] Document {n}. {TEXT}") for n in range(5)]

    # When they are sent at once
    with ThreadPoolExecutor(max_workers=5) as pool:
        list(pool.map(lambda chat: ask(client, chat), chats))

    # Then their windows share an instant: the server answered them concurrently
    calls = control(server, "GET", "/_calls")
    assert len(calls) == 5
    assert max(c["started"] for c in calls) < min(c["finished"] for c in calls)


def test_missing_api_key_is_refused(server: ModelServer) -> None:
    client = client_for(server)

    with pytest.raises(openai.AuthenticationError) as raised:
        client.chat.completions.create(
            model=MODEL,
            messages=messages(Operation.SUMMARIZE, TEXT),  # type: ignore[arg-type]
            extra_headers={"Authorization": openai.Omit()},
        )

    assert raised.value.status_code == 401
    assert control(server, "GET", "/_calls")[0]["outcome"] == "unauthorized"


def test_oversized_body_is_refused_unread(server: ModelServer) -> None:
    connection = connect(server)
    connection.putrequest("POST", "/v1/chat/completions")
    connection.putheader("Authorization", "Bearer local")
    connection.putheader("Content-Length", str(MAX_BODY_BYTES + 1))
    connection.endheaders()

    response = connection.getresponse()

    assert response.status == 413
    connection.close()


def test_stop_returns_while_a_stalled_call_is_in_flight() -> None:
    # Given a call the server stalls on, with a client willing to wait far longer than the test
    server = ModelServer().start()
    errors: list[Exception] = []

    def call() -> None:
        try:
            ask(client_for(server, timeout=60), messages(Operation.SUMMARIZE, "[[fault:timeout*1]] " + TEXT))
        except openai.APIError as err:
            errors.append(err)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    deadline = time.monotonic() + 10
    while server.in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.in_flight == 1

    # When the server stops
    started = time.monotonic()
    server.stop()

    # Then it stopped without waiting for the stall, and the client saw the connection end
    assert time.monotonic() - started < 10
    assert not server.running
    caller.join(timeout=10)
    assert not caller.is_alive()
    assert [type(err) for err in errors] == [openai.APIConnectionError]


def test_main_serves_until_terminated() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "outlast.local.model_server", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("model server: http://127.0.0.1:")
        url = line.removeprefix("model server: ")
        client = openai.OpenAI(base_url=url, api_key="local", max_retries=0, timeout=10)
        assert MODEL in [model.id for model in client.models.list()]
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0
