"""A streamed answer (`stream: true`), as OpenAI sends it: server-sent events of
`chat.completion.chunk` objects, one token at a time, the finish reason, a usage chunk when
`stream_options.include_usage` asks for one, then `data: [DONE]`.

Pure: the pieces and the bytes of each event. The HTTP layer (outlast.local.model_server) writes
them, paced by `[[pace:N]]` (tokens a second; without it, as fast as it can), breaks the
connection after CUT_AFTER_PIECES pieces for `[[fault:stream_cut*N]]`, and notices a client that
closes the stream before its end. A token here is a word with the whitespace before it (the
fake model's answers are words); the usage counts them as every answer is counted, ceil(UTF-8
bytes / 4), of what was sent.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from outlast.local.fake_model.answers import answer
from outlast.local.fake_model.completions import count_tokens, truncate
from outlast.local.fake_model.requests import ChatRequest

CUT_AFTER_PIECES = 3  # a cut stream sends this many pieces, then its connection breaks
DONE = b"data: [DONE]\n\n"
_PIECE = re.compile(r"\s*\S+|\s+$")


def pieces_of(content: str) -> list[str]:
    """The tokens of a streamed answer: each word with the whitespace before it; they join back."""
    return _PIECE.findall(content)


def event(payload: Any) -> bytes:
    """One server-sent event."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


@dataclass
class StreamedAnswer:
    """What one streamed call sends: its pieces in order, then how it ends."""

    request: ChatRequest
    content: str
    finish_reason: str
    completion_id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex[:24]}")
    created: int = field(default_factory=lambda: int(time.time()))

    @classmethod
    def of(cls, request: ChatRequest, *, broken: bool = False) -> StreamedAnswer:
        """The answer the request gets, cut to its max_tokens as a whole answer is (`broken`: a
        structured answer off its schema)."""
        content, cut = truncate(answer(request, broken=broken), request.max_tokens)
        return cls(request, content, "length" if cut else "stop")

    @property
    def pieces(self) -> list[str]:
        """The tokens, in order."""
        return pieces_of(self.content)

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.request.model,
            "system_fingerprint": "fp_outlast_local",
            "service_tier": self.request.served_tier,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }

    def events(self) -> Iterator[tuple[bytes, str]]:
        """Each token's event with the text it carries (the first also carries the role)."""
        for index, piece in enumerate(self.pieces):
            delta = {"role": "assistant", "content": piece} if index == 0 else {"content": piece}
            yield event(self._chunk(delta)), piece

    def ending(self) -> bytes:
        """The finish reason's chunk, the usage chunk when asked for, and `[DONE]`."""
        parts = [event(self._chunk({}, self.finish_reason))]
        if self.request.include_usage:
            usage = self.usage(self.content)
            parts.append(
                event(
                    {
                        "id": self.completion_id,
                        "object": "chat.completion.chunk",
                        "created": self.created,
                        "model": self.request.model,
                        "service_tier": self.request.served_tier,
                        "choices": [],
                        "usage": {
                            "prompt_tokens": usage["inputTokens"],
                            "completion_tokens": usage["outputTokens"],
                            "total_tokens": usage["inputTokens"] + usage["outputTokens"],
                            "prompt_tokens_details": {"cached_tokens": self.request.cached_tokens},
                        },
                    }
                )
            )
        return b"".join([*parts, DONE])

    def usage(self, sent: str) -> dict[str, int]:
        """The tokens served for what was sent (all of it, or what went before a cut or a close)."""
        return {"inputTokens": self.request.prompt_tokens, "outputTokens": count_tokens(sent)}
