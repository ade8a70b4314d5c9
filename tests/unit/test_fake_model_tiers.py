"""The fake model and the token bill (DESIGN.md, "Cost tiers"): `service_tier` accepted and named
back, `[[fault:flex_unavailable*N]]` refusing flex calls only, as OpenAI's flex tier does, and cached
tokens for a repeated prompt prefix of 1,024 tokens or more."""

from __future__ import annotations

import pytest

from outlast.local.fake_model.model import FakeModel
from tests.unit.test_fake_model import call, chat

pytestmark = pytest.mark.unit

LONG = " ".join(f"word{n:05d}" for n in range(1200))  # about 3,000 tokens by the fake's estimate


def test_a_flex_call_is_answered_and_named_flex() -> None:
    status, completion = call(FakeModel(), chat(), service_tier="flex", prompt_cache_key="k")

    assert status == 200
    assert completion["service_tier"] == "flex"


def test_a_call_without_a_tier_is_served_at_default() -> None:
    assert call(FakeModel(), chat())[1]["service_tier"] == "default"


def test_an_unknown_tier_is_openais_400() -> None:
    assert call(FakeModel(), chat(), service_tier="cheap")[0] == 400


def test_flex_unavailable_refuses_the_first_flex_calls_as_openai_does() -> None:
    model = FakeModel()
    messages = chat("[[fault:flex_unavailable*2]] " + "The text.")

    answers = [call(model, messages, service_tier="flex") for _ in range(3)]

    assert [status for status, _ in answers] == [429, 429, 200]
    assert answers[0][1]["error"]["code"] == "resource_unavailable"


def test_flex_unavailable_leaves_a_standard_call_alone() -> None:
    model = FakeModel()
    messages = chat("[[fault:flex_unavailable*5]] " + "The text.")

    assert call(model, messages)[0] == 200


def test_a_repeated_long_prefix_is_reported_cached() -> None:
    model = FakeModel()
    first = call(model, chat(LONG))[1]["usage"]

    second = call(model, chat(LONG))[1]["usage"]

    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second["prompt_tokens_details"]["cached_tokens"]
    assert cached >= 1024
    assert cached % 128 == 0
    assert cached <= second["prompt_tokens"]


def test_a_shared_prefix_is_cached_up_to_where_the_prompts_part() -> None:
    model = FakeModel()
    call(model, chat(LONG + " first ending"))

    usage = call(model, chat(LONG + " another ending, longer than the first"))[1]["usage"]

    assert 1024 <= usage["prompt_tokens_details"]["cached_tokens"] < usage["prompt_tokens"]


def test_a_short_prompt_is_never_cached() -> None:
    model = FakeModel()
    call(model, chat())

    assert call(model, chat())[1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
