"""ModelProvider on the official `openai` SDK: one call, SDK retries off, errors made domain errors.

`openai` is imported only here, and only when the first client is built, so that its import
cost (about 0.6 s) stays off every other function's cold start and off the worker's import.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shared.errors import FlexUnavailableError, TerminalProviderError, TransientProviderError
from shared.job import Usage
from shared.models import requires_max_completion_tokens
from shared.planner import estimate_call_usage
from shared.ports import Completion, CompletionRequest, StreamControl, StreamStopped, TextSink
from shared.tiers import Tier

if TYPE_CHECKING:
    import openai

# Provider error codes (the `code` of a 400 body) that name a job error code of DESIGN.md.
_TERMINAL_CODES = {
    "context_length_exceeded": "context_length_exceeded",
    "content_policy_violation": "content_policy",
    "content_filter": "content_policy",
}


class OpenAIChatProvider:
    """Chat Completions through one shared, thread-safe `openai.OpenAI` client per API key.

    The key is read through a cached secret source on every call; when an operator rotates it,
    the next call after the cache expires builds a client with the new key.
    """

    def __init__(
        self,
        api_key: Callable[[], str],
        client_for_key: Callable[[str], openai.OpenAI],
        flex_timeout_seconds: float,
    ) -> None:
        self._api_key = api_key
        self._flex_timeout_seconds = flex_timeout_seconds
        self._client_for_key = client_for_key
        self._lock = threading.Lock()
        self._client: openai.OpenAI | None = None
        self._client_key: str | None = None

    def _client_for_current_key(self) -> openai.OpenAI:
        key = self._api_key()
        with self._lock:
            if self._client is None or key != self._client_key:
                self._client = self._client_for_key(key)
                self._client_key = key
            return self._client

    def complete(self, request: CompletionRequest) -> Completion:
        """One call; every SDK exception leaves as a TransientProviderError or TerminalProviderError."""
        import openai  # noqa: PLC0415 - loaded with the first client; here a dictionary lookup

        client = self._client_for_current_key()
        try:
            response = client.chat.completions.create(**self._arguments(request))
        except openai.APIError as error:
            raise classify_error(error) from None
        choice = response.choices[0] if response.choices else None
        usage = usage_of(response.usage, response.service_tier, request.tier) if response.usage else None
        if choice is not None and choice.finish_reason == "content_filter":
            # Refused after generating: the tokens were billed, so the job keeps its usage.
            raise TerminalProviderError("content_policy", "The provider filtered the output.", usage=usage)
        if choice is not None and choice.message.refusal:
            # A structured call the model declined: its refusal text is no answer to the schema.
            raise TerminalProviderError("content_policy", "The model refused the request.", usage=usage)
        text = (choice.message.content or "") if choice is not None else ""
        truncated = choice is not None and choice.finish_reason == "length"
        return Completion(text=text.strip(), usage=usage, truncated=truncated)

    def stream(self, request: CompletionRequest, on_text: TextSink, control: StreamControl) -> Completion:
        """One streaming call (`stream_options.include_usage`): each piece of text goes to `on_text`
        as it arrives. The stream is closed here, by its reader, when `control` is stopped (at the
        next piece), when it ends and when it fails. Without a usage chunk the usage is an estimate
        of the messages and the text received (ceil(UTF-8 bytes / 4) each), flagged as such."""
        import openai  # noqa: PLC0415 - loaded with the first client

        client = self._client_for_current_key()
        if control.stopped:
            raise StreamStopped(None)  # stopped before it started: nothing was spent
        try:
            stream = client.chat.completions.create(
                **self._arguments(request), stream=True, stream_options={"include_usage": True}
            )
        except openai.APIError as error:
            raise classify_error(error) from None
        received = _Received(request.tier)
        try:
            with stream:  # closes the response (the provider stops generating) however this ends
                for chunk in stream:
                    received.take(chunk, on_text)
                    if control.stopped:
                        break
        except openai.APIError as error:
            if control.stopped:
                raise StreamStopped(received.usage_or_estimate(request)) from None
            failure = classify_error(error)
            failure.usage = received.usage_or_estimate(request)  # generated before it failed: billed
            raise failure from None
        except Exception as error:
            # The connection broke mid-stream (the SDK hands the transport's errors through as they are).
            if control.stopped:
                raise StreamStopped(received.usage_or_estimate(request)) from None
            raise TransientProviderError(
                "The provider's stream was cut.", usage=received.usage_or_estimate(request)
            ) from error
        return received.outcome(request, stopped=control.stopped)

    def _arguments(self, request: CompletionRequest) -> dict[str, Any]:
        arguments = chat_arguments(request)
        if request.tier is Tier.FLEX:
            # A flex call may queue at the provider: it gets its own, longer timeout.
            arguments["timeout"] = self._flex_timeout_seconds
        return arguments


def usage_of(usage: Any, served_tier: str | None, asked: Tier) -> Usage:
    """The provider's usage report as ours: cached input from `prompt_tokens_details`, and the tier
    the provider says it served the call at (`service_tier`; the one asked for when it says none)."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    return Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        cached_input_tokens=cached,
        tiers=frozenset({_SERVED_TIERS.get(served_tier or "", asked)}),
    )


# `service_tier` in an answer names how the call was served; `default` is the standard tier.
_SERVED_TIERS = {"default": Tier.STANDARD, "flex": Tier.FLEX}


def chat_arguments(request: CompletionRequest) -> dict[str, Any]:
    """The Chat Completions arguments of a call (a batch line's body too: shared.batches)."""
    arguments: dict[str, Any] = {"model": request.model, "messages": request.messages}
    if request.max_output_tokens is not None:
        # Reasoning models refuse `max_tokens` (shared.models); the rest keep the name they know.
        name = "max_completion_tokens" if requires_max_completion_tokens(request.model) else "max_tokens"
        arguments[name] = request.max_output_tokens
    if request.tier is Tier.FLEX:
        arguments["service_tier"] = "flex"
    if request.cache_key is not None:
        arguments["prompt_cache_key"] = request.cache_key
    if request.response_schema is not None:
        # Strict structured outputs (DESIGN.md, "Structured extraction"): the provider holds the
        # answer to the schema; the worker checks it all the same before it is kept.
        arguments["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": request.response_schema.name,
                "schema": request.response_schema.schema,
                "strict": True,
            },
        }
    return arguments


class _Received:
    """What one stream delivered so far: its text, the finish reason and the usage chunk."""

    def __init__(self, tier: Tier) -> None:
        self.tier = tier
        self.pieces: list[str] = []
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.refused = False  # a structured call the model declined (its refusal is not streamed on)

    def take(self, chunk: Any, on_text: TextSink) -> None:
        if chunk.usage is not None:
            self.usage = usage_of(chunk.usage, getattr(chunk, "service_tier", None), self.tier)
        for choice in chunk.choices or ():
            content = choice.delta.content if choice.delta is not None else None
            if content:
                self.pieces.append(content)
                on_text(content)
            if choice.delta is not None and choice.delta.refusal:
                self.refused = True
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason

    def usage_or_estimate(self, request: CompletionRequest) -> Usage:
        if self.usage is not None:
            return self.usage
        estimate = estimate_call_usage(request.messages, "".join(self.pieces))
        return estimate.model_copy(update={"tiers": frozenset({request.tier})})

    def outcome(self, request: CompletionRequest, *, stopped: bool) -> Completion:
        """The completion of a stream that ended (or was stopped) without raising."""
        usage = self.usage_or_estimate(request)
        if stopped:
            raise StreamStopped(usage)
        if self.finish_reason is None:
            # The connection closed cleanly but the model never said it finished: cut, all the same.
            raise TransientProviderError("The provider's stream ended before it finished.", usage=usage)
        if self.finish_reason == "content_filter":
            raise TerminalProviderError("content_policy", "The provider filtered the output.", usage=usage)
        if self.refused:
            raise TerminalProviderError("content_policy", "The model refused the request.", usage=usage)
        truncated = self.finish_reason == "length"
        return Completion(text="".join(self.pieces).strip(), usage=usage, truncated=truncated)


def _retry_after(error: openai.APIStatusError) -> float | None:
    headers = error.response.headers
    milliseconds = headers.get("retry-after-ms")
    seconds = headers.get("retry-after")
    try:
        if milliseconds is not None:
            return float(milliseconds) / 1000
        if seconds is not None:
            return float(seconds)
    except ValueError:
        return None  # an HTTP-date or garbage: fall back to our own backoff
    return None


def classify_error(error: openai.APIError) -> TransientProviderError | TerminalProviderError:
    """Map an SDK error to a failure class by type and status code, never by message text."""
    import openai  # noqa: PLC0415

    if isinstance(error, openai.APITimeoutError | openai.APIConnectionError):
        return TransientProviderError("The provider did not answer in time.")
    if not isinstance(error, openai.APIStatusError):
        return TransientProviderError("The provider's answer could not be read.")
    status = error.status_code
    if status in {401, 403, 404}:
        return TerminalProviderError("provider_auth", "The provider refused outlast's credentials or model.")
    if status == 429 and error.code == "resource_unavailable":
        # The flex tier's "no capacity now": not a rate limit, nothing billed (DESIGN.md, "Cost tiers").
        return FlexUnavailableError("The flex tier has no capacity now.", retry_after=_retry_after(error))
    if status in {408, 409, 429} or status >= 500:
        return TransientProviderError("The provider is busy or failing.", retry_after=_retry_after(error))
    code = error.code if isinstance(error.code, str) else ""
    job_code = _TERMINAL_CODES.get(code, "invalid_input")
    return TerminalProviderError(job_code, "The provider rejected the request.")


def build_openai_client(api_key: str, base_url: str | None, timeout_seconds: float) -> openai.OpenAI:
    """The SDK client: our timeout, and max_retries=0 so the retry policy lives in the worker alone."""
    import openai  # noqa: PLC0415 - the lazy import this module exists for

    return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout_seconds, max_retries=0)
