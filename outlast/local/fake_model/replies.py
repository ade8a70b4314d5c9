"""The fake model's HTTP answers, as OpenAI shapes them: errors, injected faults, the context check.

A reply is what the HTTP layer writes: a status, a JSON body, extra headers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from outlast.local.fake_model.requests import ChatRequest

RETRY_AFTER_SECONDS = 1
MODELS = ("gpt-4o-mini", "gpt-4o", "gpt-4.1-mini", "gpt-4.1-nano")


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: status, JSON body, extra headers."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


def error_reply(
    status: int, message: str, error_type: str, code: str | None, headers: dict[str, str] | None = None
) -> Reply:
    """An error in OpenAI's shape; the SDK reads `code` and `type` from inside `error`."""
    body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return Reply(status, body, headers or {})


def _rate_limit() -> Reply:
    # The SDK prefers retry-after-ms; the worker reads Retry-After. Send both, consistent.
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS), "retry-after-ms": str(RETRY_AFTER_SECONDS * 1000)}
    message = "Rate limit reached for requests (injected by [[fault:rate_limit]])."
    return error_reply(429, message, "requests", "rate_limit_exceeded", headers)


def _flex_unavailable() -> Reply:
    # The flex tier's answer when it has no capacity: nothing was generated, nothing is billed.
    message = (
        "Resource unavailable: the flex tier has no capacity now (injected by [[fault:flex_unavailable]])."
    )
    return error_reply(429, message, "invalid_request_error", "resource_unavailable")


def _context_length() -> Reply:
    message = "This model's maximum context length was exceeded (injected by [[fault:context_length]])."
    return error_reply(400, message, "invalid_request_error", "context_length_exceeded")


def _content_policy() -> Reply:
    message = "Your request was rejected by the safety system (injected by [[fault:content_policy]])."
    return error_reply(400, message, "invalid_request_error", "content_policy_violation")


def _server_error() -> Reply:
    message = "The server had an error while processing your request (injected by [[fault:server_error]])."
    return error_reply(500, message, "server_error", None)


# The answer of each fault answered with an error (the timeout is not answered at all).
_FAULT_REPLIES: dict[str, Callable[[], Reply]] = {
    "rate_limit": _rate_limit,
    "flex_unavailable": _flex_unavailable,
    "context_length": _context_length,
    "content_policy": _content_policy,
    "server_error": _server_error,
}


def fault_reply(fault: str) -> Reply:
    """The answer OpenAI gives for an injected fault."""
    return _FAULT_REPLIES.get(fault, _server_error)()


def context_reply(request: ChatRequest, context_tokens: int) -> Reply | None:
    """OpenAI's 400 when the messages (plus max_tokens, when sent) exceed the context; else None."""
    prompt = request.prompt_tokens
    if request.max_tokens is not None and prompt + request.max_tokens > context_tokens:
        message = (
            f"This model's maximum context length is {context_tokens} tokens. However, you requested "
            f"{prompt + request.max_tokens} tokens ({prompt} in the messages, {request.max_tokens} in "
            "the completion). Please reduce the length of the messages or completion."
        )
    elif prompt > context_tokens:
        message = (
            f"This model's maximum context length is {context_tokens} tokens. However, your messages "
            f"resulted in {prompt} tokens. Please reduce the length of the messages."
        )
    else:
        return None
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    return Reply(400, body)


def unauthorized() -> Reply:
    """OpenAI's 401 for a call without an API key."""
    message = "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'."
    return error_reply(401, message, "invalid_request_error", None)


def not_found(path: str) -> Reply:
    """OpenAI's 404 for a path it does not serve."""
    return error_reply(404, f"Invalid URL ({path}).", "invalid_request_error", "unknown_url")


def model_list() -> Reply:
    """`GET /v1/models`: the models the fake model answers as."""
    data = [{"id": model, "object": "model", "created": 0, "owned_by": "outlast"} for model in MODELS]
    return Reply(200, {"object": "list", "data": data})
