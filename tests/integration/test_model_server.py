"""The local model server, driven by the real openai SDK over a real socket."""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from outlast.local.fake_model.requests import messages_hash
from outlast.local.model_server import MAX_BODY_BYTES, ModelServer
from shared.contract import Operation
from shared.plan_parameters import PlanParameters
from shared.planner import StepPlan, final_output, plan_job, step_messages
from shared.prompts import MAP_TEMPLATES, REDUCE_TEMPLATES, template_for

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
    """Call one of the test-only endpoints (/_calls, /_tally, /_faults/reset, /_calls/reset).

    A read waits for every call to end first: a call is logged just after its answer is sent, so a
    client that has its answer can otherwise read the log before its own call is in it."""
    if method == "GET":
        wait_until_idle(server)
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


def test_the_tally_counts_every_completion_served_per_request_hash(server: ModelServer) -> None:
    # Given a refused and an answered call of one request, another request answered twice, and
    # a third abandoned by its client before the answer (sent all the same)
    client = client_for(server)
    refused_then_answered = messages(Operation.SUMMARIZE, "[[fault:server_error*1]] " + TEXT)
    twice = messages(Operation.ANALYZE, TEXT)
    abandoned = messages(Operation.SUMMARIZE, "[[delay:1]] " + TEXT)
    with pytest.raises(openai.InternalServerError):
        ask(client, refused_then_answered)
    first = client.chat.completions.create(model=MODEL, messages=refused_then_answered)  # type: ignore[arg-type]
    usages = [client.chat.completions.create(model=MODEL, messages=twice).usage for _ in range(2)]  # type: ignore[arg-type]
    with pytest.raises(openai.APITimeoutError):
        ask(client_for(server, timeout=0.2), abandoned)
    wait_until_idle(server)

    # When the server's tally is read
    tally = control(server, "GET", "/_tally")

    # Then it holds, per request hash, the tokens of every completion it sent: the refusal counts
    # nothing, the abandoned answer counts in full (it was generated), and a repeat adds up
    assert first.usage is not None
    assert tally[messages_hash(refused_then_answered)] == {
        "calls": 1,
        "inputTokens": first.usage.prompt_tokens,
        "outputTokens": first.usage.completion_tokens,
    }
    assert all(usage is not None for usage in usages)
    assert tally[messages_hash(twice)] == {
        "calls": 2,
        "inputTokens": sum(usage.prompt_tokens for usage in usages if usage),
        "outputTokens": sum(usage.completion_tokens for usage in usages if usage),
    }
    assert tally[messages_hash(abandoned)]["calls"] == 1
    assert set(tally) == {messages_hash(chat) for chat in (refused_then_answered, twice, abandoned)}


def wait_until_idle(server: ModelServer) -> None:
    """Until every call the server took has finished (an abandoned one ends on the server later)."""
    deadline = time.monotonic() + 10
    while server.in_flight:
        assert time.monotonic() < deadline, "the server never went idle"
        time.sleep(0.05)


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


# --- long inputs: the context, map and reduce prompts ------------------------------------------


def six_hundred_kb() -> str:
    """About 600 KB of sentences: about 150k estimated tokens, over the default 128k context."""
    return "".join(f"Sentence {n} of the long report says something new. " for n in range(12_000))


def test_a_call_over_the_context_is_refused_as_openai_does(server: ModelServer) -> None:
    # Given today's single call for a 600 KB document
    chat = messages(Operation.SUMMARIZE, six_hundred_kb())
    estimate = math.ceil(sum(len(m["content"].encode()) for m in chat) / 4)
    assert estimate > 128_000

    # When it is sent
    with pytest.raises(openai.BadRequestError) as raised:
        ask(client_for(server), chat)

    # Then the answer is OpenAI's context_length_exceeded
    error = raised.value
    assert error.status_code == 400
    assert (error.code, error.type, error.param) == (
        "context_length_exceeded",
        "invalid_request_error",
        "messages",
    )
    assert error.body == {
        "message": (
            f"This model's maximum context length is 128000 tokens. However, your messages resulted in "
            f"{estimate} tokens. Please reduce the length of the messages."
        ),
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    [call] = control(server, "GET", "/_calls")
    assert (call["outcome"], call["status"], call["kind"]) == ("context_length_exceeded", 400, "single")


def test_the_context_counts_max_tokens_and_its_edge_is_inclusive() -> None:
    chat = messages(Operation.SUMMARIZE, TEXT)
    estimate = math.ceil(sum(len(m["content"].encode()) for m in chat) / 4)

    with ModelServer(context_tokens=estimate + 10) as server:
        client = client_for(server)
        # Messages alone fit; with room for exactly 10 more tokens, max_tokens=10 fits too
        assert ask(client, chat)
        assert ask(client, chat, max_tokens=10)
        # One token more is refused, in the form OpenAI uses when a completion is requested
        with pytest.raises(openai.BadRequestError) as raised:
            ask(client, chat, max_tokens=11)

    assert raised.value.code == "context_length_exceeded"
    assert (
        f"However, you requested {estimate + 11} tokens ({estimate} in the messages, 11 in the completion)."
        in raised.value.message
    )


def test_a_refusal_for_context_spends_no_counted_fault() -> None:
    chat = messages(Operation.SUMMARIZE, "[[fault:rate_limit*1]] " + TEXT)
    estimate = math.ceil(sum(len(m["content"].encode()) for m in chat) / 4)

    with ModelServer(context_tokens=estimate) as server:
        client = client_for(server)
        with pytest.raises(openai.BadRequestError):
            ask(client, chat, max_tokens=1)
        # The rate limit still fires on the first call that fits
        with pytest.raises(openai.RateLimitError):
            ask(client, chat)
        assert ask(client, chat)


def test_the_same_document_in_planned_steps_fits_with_one_call_per_step(server: ModelServer) -> None:
    # Given the 600 KB document planned in steps
    text = six_hundred_kb()
    plan = plan_job(text, Operation.SUMMARIZE, PlanParameters(), prompt_version="summarize-v1")
    assert plan.total_steps > 2

    # When every step is run in order, each reduce reading its children's outputs
    outputs = run_plan(client_for(server), plan)

    # Then every call succeeded, one per step, and the result combines the parts
    calls = control(server, "GET", "/_calls")
    assert [c["outcome"] for c in calls] == ["ok"] * plan.total_steps
    expected_hashes = [
        messages_hash(step_messages(plan, s, [outputs[i] for i in s.inputs])) for s in plan.steps
    ]
    assert Counter(c["requestHash"] for c in calls) == Counter(expected_hashes)
    result = final_output(plan, outputs)
    assert result.startswith("Sentence 0 of the long report")
    assert len(result.split()) <= 64  # a share of 60 words for each of the last reduce's outputs
    maps = [c for c in calls if c["kind"] == "map"]
    assert sorted(c["part"] for c in maps) == list(range(1, len(plan.chunks) + 1))
    assert {c["parts"] for c in maps} == {len(plan.chunks)}
    assert {c["promptVersion"] for c in calls} == {"summarize-map-v2", "summarize-reduce-v1"}


def run_plan(client: openai.OpenAI, plan: StepPlan) -> dict[str, str]:
    """Every step of the plan in order, as a worker without concurrency would run them."""
    outputs: dict[str, str] = {}
    for step in plan.steps:
        chat = step_messages(plan, step, [outputs[child] for child in step.inputs])
        options = {"max_tokens": step.max_tokens} if step.max_tokens is not None else {}
        outputs[step.step_id] = ask(client, chat, **options)
    return outputs


def test_a_fault_in_one_chunk_fails_only_that_call_and_is_never_echoed(server: ModelServer) -> None:
    # Given a plan of three chunks, the second holding a counted rate limit
    parameters = PlanParameters(chunk_tokens=400, step_output_tokens=100)
    text = "".join(
        f"Part {n} opens here. {'[[fault:rate_limit*2]] ' if n == 1 else ''}"
        + "More words follow. " * 60
        + "\n\n"
        for n in range(3)
    )
    plan = plan_job(text, Operation.SUMMARIZE, parameters, prompt_version="summarize-v1")
    assert [c.count("[[fault:") for c in plan.chunks[:3]] == [0, 1, 0]
    client = client_for(server)
    second = plan.steps[1]

    # When the faulted map step is called until it answers
    for _ in range(2):
        with pytest.raises(openai.RateLimitError):
            ask(client, step_messages(plan, second))
    summary = ask(client, step_messages(plan, second))

    # Then its answer holds no directive, and the rest of the plan runs without a fault
    assert "[[" not in summary
    assert summary.startswith("Part 1 opens here.")
    outputs = run_plan(client, plan)
    assert all("[[" not in output for output in outputs.values())
    calls = control(server, "GET", "/_calls")
    failed = [c for c in calls if c["outcome"] != "ok"]
    assert [(c["outcome"], c["part"]) for c in failed] == [("rate_limit", 2), ("rate_limit", 2)]


def test_analyze_reduces_add_up_the_analyses_of_the_parts(server: ModelServer) -> None:
    client = client_for(server)
    reduce_chat = REDUCE_TEMPLATES[Operation.ANALYZE].render_parts(
        [
            ask(
                client,
                MAP_TEMPLATES[Operation.ANALYZE].render(
                    "Refund the payment. Refund it now.", part=1, parts=2
                ),
            ),
            ask(client, MAP_TEMPLATES[Operation.ANALYZE].render("The payment was late.", part=2, parts=2)),
        ]
    )

    assert ask(client, reduce_chat).splitlines() == [
        "Words: 10",
        "Sentences: 3",
        "Most frequent words: payment (2), refund (2), late (1)",
    ]


def test_a_classify_map_answers_one_of_the_labels(server: ModelServer) -> None:
    chat = MAP_TEMPLATES[Operation.CLASSIFY].render(
        "Where is my parcel? The shipping is slow.", LABELS, part=4, parts=9
    )

    assert ask(client_for(server), chat) == "shipping"
    [call] = control(server, "GET", "/_calls")
    assert (call["operation"], call["kind"], call["part"], call["parts"]) == ("classify", "map", 4, 9)


def test_main_takes_the_context_size() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "outlast.local.model_server", "--port", "0", "--context-tokens", "50"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip().removeprefix("model server: ")
        client = openai.OpenAI(base_url=url, api_key="local", max_retries=0, timeout=10)
        with pytest.raises(openai.BadRequestError) as raised:
            ask(client, messages(Operation.SUMMARIZE, TEXT * 3))
        assert "maximum context length is 50 tokens" in raised.value.message
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


def test_only_a_verbose_server_logs_requests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a verbose and a quiet model server, each asked for its models once
    logs = {}
    for verbose in (True, False):
        with ModelServer(verbose=verbose) as running:
            client_for(running).models.list()
        logs[verbose] = capsys.readouterr().err
    # Then only the verbose one wrote http.server's access line (sent before the answer was)
    assert '"GET /v1/models HTTP/1.1" 200' in logs[True]
    assert "/v1/models" not in logs[False]
