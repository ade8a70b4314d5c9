"""A Chat Completions request, read: the few fields the fake model answers from, validated as OpenAI does."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

from shared.extraction.schema_subset import schema_problem

BYTES_PER_TOKEN = 4  # the token estimate everywhere: ceil(UTF-8 bytes / 4)


class InvalidRequestError(ValueError):
    """The request body is not a Chat Completions request the fake model can answer."""


@dataclass(frozen=True)
class ChatRequest:
    """The parts of a Chat Completions request the answer is derived from."""

    model: str
    messages: list[dict[str, Any]]
    max_tokens: int | None
    request_hash: str
    stream: bool = False  # answer with server-sent events (`stream: true`)
    include_usage: bool = False  # `stream_options.include_usage`: a last chunk with the usage
    # `response_format` `json_schema`: the schema the answer matches (None: a text answer)
    response_schema: dict[str, Any] | None = None
    service_tier: str | None = None  # as sent: `flex` asks for the flex tier
    # Of prompt_tokens, those a repeated prefix let the prompt cache serve (set by the model).
    cached_tokens: int = 0

    @property
    def flex(self) -> bool:
        """True when the call asks for the flex tier."""
        return self.service_tier == "flex"

    @property
    def served_tier(self) -> str:
        """The `service_tier` an answer names: how the call was served."""
        return "flex" if self.flex else "default"

    @property
    def text(self) -> str:
        """Every message's text, where directives are looked for."""
        return "\n".join(content_text(message) for message in self.messages)

    @property
    def prompt_tokens(self) -> int:
        """The estimate of the messages' tokens: ceil(UTF-8 bytes of their text / 4)."""
        size = sum(len(content_text(message).encode("utf-8")) for message in self.messages)
        return math.ceil(size / BYTES_PER_TOKEN)

    def last(self, role: str) -> str:
        """The text of the last message with this role, or empty."""
        found = [content_text(m) for m in self.messages if m.get("role") == role]
        return found[-1] if found else ""


def parse_chat_request(body: bytes) -> ChatRequest:
    """Validate the few fields the fake model reads; OpenAI answers 400 to the same mistakes."""
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InvalidRequestError("The request body is not valid JSON.") from err
    if not isinstance(payload, dict):
        raise InvalidRequestError("The request body must be a JSON object.")
    model, messages = payload.get("model"), payload.get("messages")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError("you must provide a model parameter")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise InvalidRequestError("'messages' must be a non-empty array of message objects.")
    max_tokens = payload.get("max_completion_tokens", payload.get("max_tokens"))
    if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
        raise InvalidRequestError("max_tokens must be a positive integer.")
    stream, options = payload.get("stream", False), payload.get("stream_options")
    if type(stream) is not bool:
        raise InvalidRequestError("stream must be a boolean.")
    if options is not None and (not stream or not isinstance(options, dict)):
        raise InvalidRequestError("stream_options is only allowed when stream is true.")
    include_usage = bool((options or {}).get("include_usage", False))
    schema = response_schema(payload.get("response_format"))
    service_tier = payload.get("service_tier")
    if service_tier is not None and service_tier not in SERVICE_TIERS:
        raise InvalidRequestError(f"service_tier must be one of {', '.join(sorted(SERVICE_TIERS))}.")
    cache_key = payload.get("prompt_cache_key")
    if cache_key is not None and not isinstance(cache_key, str):
        raise InvalidRequestError("prompt_cache_key must be a string.")
    return ChatRequest(
        model, messages, max_tokens, messages_hash(messages), stream, include_usage, schema, service_tier
    )


# The values OpenAI's Chat Completions accept for `service_tier`.
SERVICE_TIERS = frozenset({"auto", "default", "flex", "scale", "priority"})


def response_schema(requested: Any) -> dict[str, Any] | None:
    """The schema a `response_format` asks the answer to match; None for a text answer. A format
    OpenAI refuses is refused the same way: a `json_schema` without a name or a schema object, and
    a strict one outside the subset strict structured outputs accept (DESIGN.md, "Structured
    extraction")."""
    if requested is None:
        return None
    if not isinstance(requested, dict) or requested.get("type") not in {"text", "json_object", "json_schema"}:
        raise InvalidRequestError("response_format.type must be text, json_object or json_schema.")
    if requested["type"] != "json_schema":
        return None
    spec = requested.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise InvalidRequestError("response_format.json_schema must name its schema.")
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise InvalidRequestError("response_format.json_schema.schema must be an object.")
    problem = schema_problem(schema) if spec.get("strict") is True else None
    if problem is not None:
        raise InvalidRequestError(
            f"Invalid schema for response_format '{spec['name']}': {problem.reason} ({problem.pointer})."
        )
    return schema


def messages_hash(messages: list[dict[str, Any]]) -> str:
    """SHA-256 of the canonical JSON of the messages: the key of the fault counters and the tally."""
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def content_text(message: dict[str, Any]) -> str:
    """A message's text, whether content is a string or a list of typed parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def authorized(header: str | None) -> bool:
    """True for any bearer token: the fake model checks that a key is sent, not which."""
    scheme, _, token = (header or "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())
