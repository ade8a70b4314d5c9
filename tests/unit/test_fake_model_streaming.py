"""The fake model's streamed answers on their own: the request's `stream`, the pieces and their
server-sent events, `[[pace:N]]`, and which calls `[[fault:stream_cut*N]]` cuts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outlast.local.fake_model.directives import pace_tokens_per_second, strip_directives
from outlast.local.fake_model.model import FakeModel
from outlast.local.fake_model.requests import InvalidRequestError, parse_chat_request
from outlast.local.fake_model.streaming import DONE, StreamedAnswer, pieces_of
from shared.contract import Operation
from shared.prompts import template_for

pytestmark = pytest.mark.unit

KEY = "Bearer local"
TEXT = "The invoice was paid twice. Please refund the second payment. Thanks for the quick help!"


def body(text: str = TEXT, **fields: Any) -> bytes:
    messages = template_for(Operation.SUMMARIZE).render(text, None)
    return json.dumps({"model": "gpt-4o-mini", "messages": messages, **fields}).encode()


def sse(data: bytes) -> list[Any]:
    """The payloads of a run of server-sent events (`[DONE]` as the string)."""
    events = [chunk for chunk in data.split(b"\n\n") if chunk]
    assert all(chunk.startswith(b"data: ") for chunk in events)
    return [json.loads(chunk[6:]) if chunk != DONE.strip() else "[DONE]" for chunk in events]


class TestRequests:
    def test_stream_and_include_usage_are_read(self) -> None:
        request = parse_chat_request(body(stream=True, stream_options={"include_usage": True}))

        assert (request.stream, request.include_usage) == (True, True)
        assert parse_chat_request(body()).stream is False

    @pytest.mark.parametrize(
        "fields",
        [
            {"stream": "yes"},
            {"stream_options": {"include_usage": True}},
            {"stream": True, "stream_options": 1},
        ],
    )
    def test_a_malformed_stream_request_is_refused_as_openai_does(self, fields: dict[str, Any]) -> None:
        with pytest.raises(InvalidRequestError):
            parse_chat_request(body(**fields))


class TestPieces:
    @pytest.mark.parametrize("content", ["One two three.", "One", "  leading and trailing  ", ""])
    def test_the_pieces_join_back_to_the_answer(self, content: str) -> None:
        assert "".join(pieces_of(content)) == content

    def test_each_piece_is_a_word_with_the_space_before_it(self) -> None:
        assert pieces_of("Once upon a time.") == ["Once", " upon", " a", " time."]


class TestEvents:
    def test_chunks_then_the_finish_reason_then_the_usage_then_done(self) -> None:
        request = parse_chat_request(body(stream=True, stream_options={"include_usage": True}))
        answer = StreamedAnswer.of(request)

        chunks = [sse(data)[0] for data, _ in answer.events()]
        ending = sse(answer.ending())

        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": answer.pieces[0]}
        assert "".join(c["choices"][0]["delta"]["content"] for c in chunks) == answer.content
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        finish, usage, done = ending
        assert finish["choices"][0]["finish_reason"] == "stop"
        assert usage["choices"] == []
        assert usage["usage"]["completion_tokens"] == -(-len(answer.content.encode()) // 4)
        assert done == "[DONE]"

    def test_without_include_usage_there_is_no_usage_chunk(self) -> None:
        answer = StreamedAnswer.of(parse_chat_request(body(stream=True)))

        assert [e if e == "[DONE]" else e["choices"][0]["finish_reason"] for e in sse(answer.ending())] == [
            "stop",
            "[DONE]",
        ]


class TestDirectives:
    def test_pace_is_tokens_a_second_and_never_echoed(self) -> None:
        assert pace_tokens_per_second("slow [[pace:4]] text") == 4.0
        assert pace_tokens_per_second("no pace") is None
        assert pace_tokens_per_second("[[pace:0]]") is None
        assert strip_directives("a [[pace:4]] b") == "a  b"

    def test_stream_cut_cuts_the_first_n_streams_then_streams_whole(self) -> None:
        model = FakeModel()
        cut = body(f"{TEXT} [[fault:stream_cut*1]]", stream=True)

        first, second = model.take(cut, KEY), model.take(cut, KEY)

        assert (first.streams, first.cuts) == (True, True)
        assert (second.streams, second.cuts) == (True, False)

    def test_a_call_that_does_not_stream_is_answered_whole_and_counts(self) -> None:
        model = FakeModel()
        directive = f"{TEXT} [[fault:stream_cut*1]]"

        plain = model.take(body(directive), KEY)
        streamed = model.take(body(directive, stream=True), KEY)

        assert plain.streams is False
        assert plain.reply()[0].status == 200
        assert streamed.cuts is False  # the first call (not streamed) used the one cut up

    def test_a_refused_or_faulted_stream_is_answered_as_an_error(self) -> None:
        model = FakeModel()

        limited = model.take(body(f"{TEXT} [[fault:rate_limit*1]]", stream=True), KEY)

        assert limited.streams is False
        assert limited.reply()[0].status == 429
