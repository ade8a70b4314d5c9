"""The worker's provider (the real openai SDK over a real socket) against the local model server,
on the token bill: flex's 429 `resource_unavailable` reaches the worker as a deferral's error, and
the cached tokens and tier the server reports become the call's usage."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from functions.worker.provider import OpenAIChatProvider, build_openai_client
from outlast.local.model_server import ModelServer
from shared.contract import Operation
from shared.errors import FlexUnavailableError
from shared.ports import CompletionRequest
from shared.prompts import template_for
from shared.tiers import Tier

pytestmark = pytest.mark.integration

LONG = " ".join(f"word{n:05d}" for n in range(1200))


@pytest.fixture
def provider() -> Iterator[OpenAIChatProvider]:
    with ModelServer() as server:
        yield OpenAIChatProvider(
            lambda: "local", lambda key: build_openai_client(key, server.url, 10.0), 10.0
        )


def request(text: str, tier: Tier) -> CompletionRequest:
    return CompletionRequest(
        model="gpt-5-mini",
        messages=template_for(Operation.SUMMARIZE).render(text),
        max_output_tokens=100,
        tier=tier,
        cache_key="tenant-a:summarize:summarize-v1",
    )


def test_flex_without_capacity_is_a_flex_unavailable_error_then_an_answer(
    provider: OpenAIChatProvider,
) -> None:
    asked = request("[[fault:flex_unavailable*1]] The text.", Tier.FLEX)

    with pytest.raises(FlexUnavailableError):
        provider.complete(asked)
    answer = provider.complete(asked)

    assert answer.usage is not None
    assert answer.usage.tiers == {Tier.FLEX}


def test_a_repeated_long_prompt_reports_cached_input(provider: OpenAIChatProvider) -> None:
    first = provider.complete(request(LONG, Tier.STANDARD)).usage
    second = provider.complete(request(LONG, Tier.STANDARD)).usage

    assert first is not None
    assert second is not None
    assert first.cached_input_tokens == 0
    assert second.cached_input_tokens >= 1024
    assert second.tiers == {Tier.STANDARD}
