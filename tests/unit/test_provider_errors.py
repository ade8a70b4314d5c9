"""classify_error: each openai SDK error -> transient (with the provider's hint) or terminal (a job code).

The errors are the SDK's own: a real `openai.OpenAI` client whose httpx2 transport is an
in-memory MockTransport answers each call the way OpenAI would, so the exception class, its
status code, its `code` and its response headers are exactly what production sees. No socket
is opened.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx2
import openai
import pytest

from functions.worker.provider import classify_error
from shared.errors import TerminalProviderError, TransientProviderError
from shared.job import Usage
from shared.ports import CompletionRequest
from shared.tiers import Tier
from tests.support.providers import in_memory_provider

PROVIDER_TEXT = "Raw provider text: org-8f2 key sk-live-123 quota exceeded"

Transport = Callable[[httpx2.Request], httpx2.Response]


def sdk_error(transport: Transport) -> openai.APIError:
    """The exception the SDK raises for one chat call answered by `transport`."""
    client = openai.OpenAI(
        api_key="sk-unit-test",
        base_url="http://model.invalid/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(transport)),
    )
    with pytest.raises(openai.APIError) as raised:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    return raised.value


def answer(status: int, code: str | None = None, headers: dict[str, str] | None = None) -> openai.APIError:
    """The SDK's error for an HTTP answer in OpenAI's error shape."""
    body = {"error": {"message": PROVIDER_TEXT, "type": "invalid_request_error", "param": None, "code": code}}
    return sdk_error(lambda _request: httpx2.Response(status, json=body, headers=headers or {}))


def raising(error: Exception) -> openai.APIError:
    def transport(_request: httpx2.Request) -> httpx2.Response:
        raise error

    return sdk_error(transport)


def transient(error: openai.APIError) -> TransientProviderError:
    classified = classify_error(error)
    assert isinstance(classified, TransientProviderError)
    assert PROVIDER_TEXT not in classified.detail
    return classified


def terminal(error: openai.APIError) -> TerminalProviderError:
    classified = classify_error(error)
    assert isinstance(classified, TerminalProviderError)
    assert PROVIDER_TEXT not in classified.detail
    return classified


class TestTransient:
    def test_a_timeout_is_transient_without_a_hint(self) -> None:
        # Given the SDK's own timeout error (the transport's read timed out)
        error = raising(httpx2.ReadTimeout("timed out"))
        assert type(error) is openai.APITimeoutError

        # Then it is retried later, with our own backoff
        assert transient(error).retry_after is None

    def test_a_connection_failure_is_transient(self) -> None:
        error = raising(httpx2.ConnectError("connection refused"))
        assert type(error) is openai.APIConnectionError

        assert transient(error).retry_after is None

    @pytest.mark.parametrize(
        ("status", "error_class"),
        [
            (429, openai.RateLimitError),
            (500, openai.InternalServerError),
            (502, openai.InternalServerError),
            (503, openai.InternalServerError),
            (504, openai.InternalServerError),
            (409, openai.ConflictError),
            (408, openai.APIStatusError),
        ],
    )
    def test_busy_or_failing_answers_are_transient(self, status: int, error_class: type) -> None:
        error = answer(status, code="server_error")
        assert type(error) is error_class

        assert transient(error).retry_after is None

    def test_retry_after_ms_is_the_hint_in_seconds(self) -> None:
        error = answer(429, "rate_limit_exceeded", {"retry-after-ms": "1500"})

        assert transient(error).retry_after == 1.5

    def test_retry_after_in_seconds_is_the_hint(self) -> None:
        error = answer(429, "rate_limit_exceeded", {"Retry-After": "7"})

        assert transient(error).retry_after == 7.0

    def test_retry_after_ms_wins_over_retry_after(self) -> None:
        # As the SDK itself prefers it: the finer of the two
        error = answer(429, "rate_limit_exceeded", {"retry-after-ms": "250", "retry-after": "3"})

        assert transient(error).retry_after == 0.25

    def test_a_server_error_carries_its_retry_after_too(self) -> None:
        error = answer(503, None, {"retry-after": "12"})

        assert transient(error).retry_after == 12.0

    @pytest.mark.parametrize("value", ["Wed, 21 Oct 2015 07:28:00 GMT", "soon", ""])
    def test_an_unreadable_retry_after_falls_back_to_our_backoff(self, value: str) -> None:
        error = answer(429, "rate_limit_exceeded", {"retry-after": value})

        assert transient(error).retry_after is None

    def test_an_answer_the_sdk_could_not_validate_is_transient(self) -> None:
        request = httpx2.Request("POST", "http://model.invalid/v1/chat/completions")
        response = httpx2.Response(200, request=request, json={"unexpected": True})
        error = openai.APIResponseValidationError(response=response, body={"unexpected": True})

        assert transient(error).retry_after is None


class TestTerminal:
    def test_context_length_exceeded(self) -> None:
        error = answer(400, "context_length_exceeded")
        assert type(error) is openai.BadRequestError

        assert terminal(error).job_code == "context_length_exceeded"

    @pytest.mark.parametrize("code", ["content_policy_violation", "content_filter"])
    def test_content_policy(self, code: str) -> None:
        assert terminal(answer(400, code)).job_code == "content_policy"

    @pytest.mark.parametrize(
        ("status", "error_class"),
        [
            (401, openai.AuthenticationError),
            (403, openai.PermissionDeniedError),
            (404, openai.NotFoundError),
        ],
    )
    def test_refused_credentials_or_model_are_provider_auth(self, status: int, error_class: type) -> None:
        error = answer(status, "invalid_api_key")
        assert type(error) is error_class

        assert terminal(error).job_code == "provider_auth"

    @pytest.mark.parametrize("code", ["invalid_value", "unsupported_parameter", None])
    def test_any_other_bad_request_is_invalid_input(self, code: str | None) -> None:
        assert terminal(answer(400, code)).job_code == "invalid_input"

    def test_an_unprocessable_request_is_invalid_input(self) -> None:
        error = answer(422, "invalid_value")
        assert type(error) is openai.UnprocessableEntityError

        assert terminal(error).job_code == "invalid_input"

    def test_the_job_code_comes_from_the_code_never_from_the_message(self) -> None:
        # Given a 400 whose message names a context length problem but whose code does not
        def transport(_request: httpx2.Request) -> httpx2.Response:
            body = {"error": {"message": "maximum context length is 8192 tokens", "code": "invalid_value"}}
            return httpx2.Response(400, json=body)

        # Then the code decides
        assert terminal(sdk_error(transport)).job_code == "invalid_input"

    def test_a_non_json_error_body_is_still_classified_by_status(self) -> None:
        error = sdk_error(lambda _request: httpx2.Response(400, text="<html>Bad Request</html>"))

        assert terminal(error).job_code == "invalid_input"


class TestAFilteredAnswer:
    """A 200 whose choice was filtered: a terminal content_policy failure that keeps the billed usage."""

    def test_it_fails_with_content_policy_and_keeps_the_usage(self) -> None:
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "content_filter",
                    "message": {"role": "assistant", "content": ""},
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        }
        provider = in_memory_provider(lambda _r: httpx2.Response(200, json=body))

        with pytest.raises(TerminalProviderError) as raised:
            provider.complete(CompletionRequest(model="gpt-4o-mini", messages=[], max_output_tokens=None))

        assert raised.value.job_code == "content_policy"
        assert raised.value.usage == Usage(input_tokens=12, output_tokens=3, tiers=frozenset({Tier.STANDARD}))
