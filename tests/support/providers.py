"""The worker's real provider over the real openai SDK, its HTTP answered in memory (no socket)."""

from __future__ import annotations

from collections.abc import Callable

import httpx2
import openai

from functions.worker.provider import OpenAIChatProvider

FLEX_TIMEOUT_SECONDS = 321.0  # distinct from the client's own timeout, so a test can tell them apart


def in_memory_provider(transport: Callable[[httpx2.Request], httpx2.Response]) -> OpenAIChatProvider:
    """A provider whose every call `transport` answers."""
    return OpenAIChatProvider(
        lambda: "sk-unit-test",
        lambda key: openai.OpenAI(
            api_key=key,
            base_url="http://model.invalid/v1",
            max_retries=0,
            timeout=30.0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(transport)),
        ),
        FLEX_TIMEOUT_SECONDS,
    )
