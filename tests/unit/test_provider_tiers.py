"""The provider adapter and the token bill (DESIGN.md, "Cost tiers"): what a call sends at each tier
(`service_tier`, its timeout, `prompt_cache_key`, `max_completion_tokens`), what it reads back
(cached tokens, the tier served), and flex's 429 `resource_unavailable` as its own error. The SDK
is the real one, answered by an in-memory transport: no socket."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from functions.worker.provider import OpenAIChatProvider, classify_error
from shared.errors import FlexUnavailableError, TransientProviderError
from shared.ports import CompletionRequest
from shared.tiers import Tier
from tests.support.providers import FLEX_TIMEOUT_SECONDS, in_memory_provider
from tests.unit.test_provider_errors import answer


def completion(service_tier: str | None, cached: int | None) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": 2000, "completion_tokens": 7, "total_tokens": 2007}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    body: dict[str, Any] = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        "usage": usage,
    }
    if service_tier is not None:
        body["service_tier"] = service_tier
    return body


class Recorder:
    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.sent: list[dict[str, Any]] = []
        self.timeouts: list[Any] = []

    def provider(self) -> OpenAIChatProvider:
        def transport(request: httpx2.Request) -> httpx2.Response:
            self.sent.append(json.loads(request.content))
            self.timeouts.append(request.extensions.get("timeout"))
            return httpx2.Response(200, json=self.body)

        return in_memory_provider(transport)


def request(
    model: str = "gpt-4o-mini", tier: Tier = Tier.STANDARD, key: str | None = None
) -> CompletionRequest:
    return CompletionRequest(
        model=model,
        messages=[{"role": "user", "content": "hi"}],
        max_output_tokens=50,
        tier=tier,
        cache_key=key,
    )


def test_a_standard_call_names_no_tier_and_keeps_max_tokens() -> None:
    recorder = Recorder(completion(None, None))

    recorder.provider().complete(request())

    sent = recorder.sent[0]
    assert "service_tier" not in sent
    assert sent["max_tokens"] == 50
    assert "max_completion_tokens" not in sent


def test_a_flex_call_asks_for_flex_with_its_own_timeout() -> None:
    recorder = Recorder(completion("flex", None))

    recorder.provider().complete(request("gpt-5-mini", Tier.FLEX))

    assert recorder.sent[0]["service_tier"] == "flex"
    assert recorder.timeouts[0]["read"] == FLEX_TIMEOUT_SECONDS


def test_a_reasoning_model_gets_max_completion_tokens() -> None:
    recorder = Recorder(completion(None, None))

    recorder.provider().complete(request("gpt-5-mini"))

    assert recorder.sent[0]["max_completion_tokens"] == 50
    assert "max_tokens" not in recorder.sent[0]


def test_the_cache_key_is_sent_as_prompt_cache_key() -> None:
    recorder = Recorder(completion(None, None))

    recorder.provider().complete(request(key="k-1"))

    assert recorder.sent[0]["prompt_cache_key"] == "k-1"


def test_usage_reads_cached_tokens_and_the_tier_served() -> None:
    recorder = Recorder(completion("flex", 1536))

    usage = recorder.provider().complete(request("gpt-5-mini", Tier.FLEX)).usage

    assert usage is not None
    assert (usage.input_tokens, usage.cached_input_tokens, usage.tiers) == (
        2000,
        1536,
        frozenset({Tier.FLEX}),
    )


@pytest.mark.parametrize(
    ("served", "asked", "recorded"), [("default", Tier.FLEX, Tier.STANDARD), (None, Tier.FLEX, Tier.FLEX)]
)
def test_the_tier_recorded_is_the_one_served_else_the_one_asked(
    served: str | None, asked: Tier, recorded: Tier
) -> None:
    usage = Recorder(completion(served, None)).provider().complete(request("gpt-5-mini", asked)).usage

    assert usage is not None
    assert usage.tiers == {recorded}
    assert usage.cached_input_tokens == 0


def test_flex_without_capacity_is_its_own_transient_error() -> None:
    classified = classify_error(answer(429, "resource_unavailable", {"retry-after": "3"}))

    assert isinstance(classified, FlexUnavailableError)
    assert classified.retry_after == 3


def test_a_rate_limit_is_no_deferral() -> None:
    classified = classify_error(answer(429, "rate_limit_exceeded"))

    assert isinstance(classified, TransientProviderError)
    assert not isinstance(classified, FlexUnavailableError)
