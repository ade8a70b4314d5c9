"""Streaming against the local model server: the worker's provider (the real openai SDK, a real
socket) reads the server-sent events the fake model writes, paced, cut, or closed early."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from functions.worker.provider import OpenAIChatProvider, build_openai_client
from outlast.local.fake_model.requests import messages_hash
from outlast.local.model_server import ModelServer
from shared.contract import Operation
from shared.errors import TransientProviderError
from shared.job import Usage
from shared.planner import estimate_call_usage
from shared.ports import Completion, CompletionRequest, StreamControl, StreamStopped
from shared.prompts import template_for
from shared.tiers import Tier
from tests.integration.test_model_server import control

pytestmark = pytest.mark.integration

MODEL = "gpt-4o-mini"
SENTENCE = " ".join(f"word{n:02d}" for n in range(40))


def standard(usage: Usage) -> Usage:
    """An estimate as the provider records it for a call at the standard tier."""
    return usage.model_copy(update={"tiers": frozenset({Tier.STANDARD})})


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def provider_for(server: ModelServer) -> OpenAIChatProvider:
    return OpenAIChatProvider(lambda: "local", lambda key: build_openai_client(key, server.url, 10.0), 10.0)


def request(text: str) -> CompletionRequest:
    return CompletionRequest(
        model=MODEL, messages=template_for(Operation.SUMMARIZE).render(text, None), max_output_tokens=4096
    )


def test_a_streamed_answer_arrives_in_pieces_that_join_to_the_whole_answer_with_its_usage(
    server: ModelServer,
) -> None:
    # Given a document, asked once without streaming and once streamed
    provider = provider_for(server)
    asked = request(f"Streamed. {SENTENCE}. {SENTENCE}.")
    whole = provider.complete(asked)
    pieces: list[str] = []

    # When it is streamed
    streamed = provider.stream(asked, pieces.append, StreamControl())

    # Then it came word by word, and it is the same answer with the same (reported) usage
    assert len(pieces) > 10
    assert "".join(pieces).strip() == streamed.text == whole.text
    assert streamed.usage == whole.usage
    assert streamed.usage is not None
    assert streamed.usage.estimated is False


def test_a_cut_stream_is_transient_and_counts_what_it_sent_as_the_server_tallies_it(
    server: ModelServer,
) -> None:
    provider = provider_for(server)
    asked = request(f"Cut. {SENTENCE}. [[fault:stream_cut*1]]")
    pieces: list[str] = []

    with pytest.raises(TransientProviderError) as cut:
        provider.stream(asked, pieces.append, StreamControl())
    again = provider.stream(asked, lambda _piece: None, StreamControl())

    # The first stream broke after a few pieces; its cost is the estimate of what it sent, which is
    # what the server's own tally says it served; the second stream is whole
    assert 0 < len(pieces) < 10
    assert isinstance(cut.value.usage, Usage)
    assert cut.value.usage == standard(estimate_call_usage(asked.messages, "".join(pieces)))
    tally = control(server, "GET", "/_tally")[messages_hash(asked.messages)]
    assert again.usage is not None
    assert tally == {
        "calls": 2,
        "inputTokens": cut.value.usage.input_tokens + again.usage.input_tokens,
        "outputTokens": cut.value.usage.output_tokens + again.usage.output_tokens,
    }
    outcomes = [call["outcome"] for call in control(server, "GET", "/_calls")]
    assert outcomes == ["stream_cut", "ok"]


def test_a_stopped_stream_is_closed_and_the_server_sees_it_closed_early(server: ModelServer) -> None:
    # Given a slowly paced stream, stopped by the worker after its second piece
    provider = provider_for(server)
    asked = request(f"Stopped. {SENTENCE}. [[pace:20]]")
    control_ = StreamControl()
    pieces: list[str] = []

    def take(piece: str) -> None:
        pieces.append(piece)
        if len(pieces) == 2:
            control_.stop()

    # When the provider streams it
    with pytest.raises(StreamStopped) as stopped:
        provider.stream(asked, take, control_)

    # Then it stopped at once, counted by estimate, and the server saw its client close the stream
    assert len(pieces) == 2
    assert stopped.value.usage == standard(estimate_call_usage(asked.messages, "".join(pieces)))
    calls = control(server, "GET", "/_calls")
    assert [call["outcome"] for call in calls] == ["closed_early"]
    assert calls[0]["usage"]["outputTokens"] < estimate_call_usage(asked.messages, SENTENCE).output_tokens


def test_a_paced_stream_takes_its_time_piece_by_piece(server: ModelServer) -> None:
    provider = provider_for(server)
    asked = request(f"Paced. {SENTENCE}. [[pace:200]]")
    arrived = threading.Event()
    seen: list[str] = []

    def take(piece: str) -> None:
        seen.append(piece)
        arrived.set()

    completion: Completion = provider.stream(asked, take, StreamControl())

    assert arrived.is_set()
    assert "".join(seen).strip() == completion.text
    assert "[[" not in completion.text  # no directive is ever echoed
