"""The fake model on its own: a chat call's body in, its turn out (answer, fault, delay), and the
call log and tally it keeps. No socket: the HTTP layer's tests are tests/integration/test_model_server.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outlast.local.fake_model.model import FakeModel, Turn
from outlast.local.fake_model.requests import messages_hash
from shared.contract import Operation
from shared.prompts import MAP_TEMPLATES, template_for

pytestmark = pytest.mark.unit

MODEL = "gpt-4o-mini"
KEY = "Bearer local"
TEXT = "The invoice was paid twice. Please refund the second payment. Thanks for the quick help!"


def chat(text: str = TEXT, operation: Operation = Operation.SUMMARIZE) -> list[dict[str, str]]:
    return template_for(operation).render(text, ("billing", "shipping"))


def body(messages: list[dict[str, str]], **fields: Any) -> bytes:
    return json.dumps({"model": MODEL, "messages": messages, **fields}).encode()


def answered(model: FakeModel, turn: Turn, started: float = 1.0) -> tuple[int, Any]:
    """Act the turn out as the HTTP layer does when the answer is sent; the reply's status and body."""
    reply, outcome = turn.reply()
    model.end_call(outcome, started, started + 1)
    return reply.status, reply.body


def call(model: FakeModel, messages: list[dict[str, str]], **fields: Any) -> tuple[int, Any]:
    model.begin_call()
    return answered(model, model.take(body(messages, **fields), KEY))


def test_a_plain_call_gets_a_completion_with_its_usage() -> None:
    model = FakeModel()

    status, completion = call(model, chat())

    assert status == 200
    assert completion["object"] == "chat.completion"
    assert completion["model"] == MODEL
    assert completion["choices"][0]["finish_reason"] == "stop"
    assert completion["usage"]["total_tokens"] == (
        completion["usage"]["prompt_tokens"] + completion["usage"]["completion_tokens"]
    )


def test_counted_faults_fail_the_first_calls_of_the_same_messages_in_the_order_written() -> None:
    # Given messages asking for two rate limits, then one server error
    model = FakeModel()
    messages = chat("[[fault:rate_limit*2]] [[fault:server_error*1]] " + TEXT)

    # When they are sent four times
    statuses = [call(model, messages)[0] for _ in range(4)]

    # Then calls 1-2 get 429, call 3 gets 500, call 4 the answer; other messages have counters of their own
    assert statuses == [429, 429, 500, 200]
    assert call(model, chat("[[fault:rate_limit*1]] other"))[0] == 429


def test_a_rate_limit_says_when_to_retry() -> None:
    turn = FakeModel().take(body(chat("[[fault:rate_limit*1]] " + TEXT)), KEY)

    reply, _ = turn.reply()

    assert reply.headers == {"Retry-After": "1", "retry-after-ms": "1000"}
    assert reply.body["error"]["code"] == "rate_limit_exceeded"


def test_resetting_the_faults_restarts_the_counters_and_keeps_the_log() -> None:
    model = FakeModel()
    messages = chat("[[fault:server_error*1]] " + TEXT)
    assert [call(model, messages)[0] for _ in range(2)] == [500, 200]

    model.reset_faults()

    assert call(model, messages)[0] == 500
    assert len(model.calls()) == 3


@pytest.mark.parametrize(
    ("directive", "code"),
    [
        ("[[fault:context_length]]", "context_length_exceeded"),
        ("[[fault:content_policy]]", "content_policy_violation"),
    ],
)
def test_permanent_faults_fail_every_call(directive: str, code: str) -> None:
    model = FakeModel()
    results = [call(model, chat(f"{directive} {TEXT}")) for _ in range(3)]

    assert {(status, answer["error"]["code"]) for status, answer in results} == {(400, code)}


def test_a_timeout_stalls_and_a_delay_holds_the_answer() -> None:
    model = FakeModel()

    stalled = model.take(body(chat("[[fault:timeout*1]] " + TEXT)), KEY)
    delayed = model.take(body(chat("[[delay:2.5]] [[delay:9]] " + TEXT)), KEY)

    assert stalled.stalls
    assert stalled.unanswered("timeout").status is None
    assert not delayed.stalls
    assert delayed.delay_seconds == 2.5  # the first delay directive


def test_no_answer_holds_a_directive() -> None:
    _, completion = call(FakeModel(), chat("[[delay:0]] [[fault:rate_limit*0]] " + TEXT))

    assert "[[" not in completion["choices"][0]["message"]["content"]


def test_a_call_without_a_key_is_refused_before_anything_else() -> None:
    model = FakeModel()
    messages = chat("[[fault:rate_limit*1]] " + TEXT)

    turn = model.take(body(messages), None)
    status, _ = answered(model, turn)

    # Then 401, the request still named in the log, and its fault not counted
    assert status == 401
    assert turn.delay_seconds == 0
    assert model.calls()[0]["outcome"] == "unauthorized"
    assert model.calls()[0]["requestHash"] == messages_hash(messages)
    assert call(model, messages)[0] == 429


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "The request body is not valid JSON."),
        (b"[]", "The request body must be a JSON object."),
        (
            json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(),
            "you must provide a model parameter",
        ),
        (json.dumps({"model": MODEL, "messages": []}).encode(), "'messages' must be a non-empty array"),
        (json.dumps({"model": MODEL, "messages": [{}], "max_tokens": 0}).encode(), "max_tokens must be"),
    ],
)
def test_a_request_that_is_not_a_chat_call_gets_openais_400(raw: bytes, message: str) -> None:
    model = FakeModel()

    status, answer = answered(model, model.take(raw, KEY))

    assert status == 400
    assert answer["error"]["message"].startswith(message)
    assert model.calls()[0]["outcome"] == "invalid_request"
    assert model.calls()[0]["requestHash"] is None


def test_a_call_over_the_context_is_refused_before_its_fault_is_counted() -> None:
    model = FakeModel(context_tokens=10)
    messages = chat("[[fault:server_error*1]] " + TEXT)

    status, answer = call(model, messages)

    assert status == 400
    assert answer["error"]["param"] == "messages"
    assert model.calls()[0]["outcome"] == "context_length_exceeded"
    with pytest.raises(ValueError, match="at least 1"):
        FakeModel(context_tokens=0)


def test_max_tokens_cuts_the_answer() -> None:
    _, completion = call(FakeModel(), chat(), max_tokens=3)

    assert completion["choices"][0]["finish_reason"] == "length"
    assert completion["usage"]["completion_tokens"] <= 3


def test_the_call_log_describes_each_call_and_the_tally_counts_what_was_served() -> None:
    # Given a refused call, an answered one, a map call, and an answer its caller abandoned
    model = FakeModel()
    refused = chat("[[fault:server_error*1]] " + TEXT)
    call(model, refused)
    _, first = call(model, refused)
    mapped = next(iter(MAP_TEMPLATES.values())).render(TEXT, None, part=2, parts=3)
    call(model, mapped)
    model.begin_call()
    abandoned_turn = model.take(body(chat("gone " + TEXT)), KEY)
    _, sent = abandoned_turn.reply()
    model.end_call(abandoned_turn.abandoned(sent), 5.0, 6.0)

    calls = model.calls()
    tally = model.tally()

    # Then the log says what became of each, in order, and which prompt and part each was
    assert [(c["outcome"], c["status"]) for c in calls] == [
        ("server_error", 500),
        ("ok", 200),
        ("ok", 200),
        ("abandoned", None),
    ]
    assert calls[0]["usage"] is None
    assert (calls[1]["operation"], calls[1]["kind"], calls[1]["part"]) == ("summarize", "single", None)
    assert (calls[2]["kind"], calls[2]["part"], calls[2]["parts"]) == ("map", 2, 3)
    assert (calls[3]["started"], calls[3]["finished"]) == (5.0, 6.0)
    # And the tally counts every completion sent, the abandoned one included, never a refusal
    assert tally[messages_hash(refused)] == {
        "calls": 1,
        "inputTokens": first["usage"]["prompt_tokens"],
        "outputTokens": first["usage"]["completion_tokens"],
    }
    assert tally[messages_hash(chat("gone " + TEXT))]["calls"] == 1
    assert model.in_flight == 0

    # And resetting the log leaves the counters
    model.reset_calls()
    assert model.calls() == []
    assert call(model, refused)[0] == 200


def test_models_are_listed_for_a_caller_with_a_key() -> None:
    model = FakeModel()

    assert model.models(KEY).body["data"][0]["id"] == MODEL
    assert model.models("Basic x").status == 401
