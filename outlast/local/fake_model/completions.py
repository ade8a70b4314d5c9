"""The fake model's chat.completion: the answer, cut to max_tokens, with its usage."""

from __future__ import annotations

import math
import time
import uuid

from outlast.local.fake_model.answers import answer
from outlast.local.fake_model.replies import Reply
from outlast.local.fake_model.requests import BYTES_PER_TOKEN, ChatRequest


def count_tokens(text: str) -> int:
    """The same estimate as a prompt's: ceil(UTF-8 bytes / 4); deterministic."""
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)


def truncate(text: str, max_tokens: int | None) -> tuple[str, bool]:
    """Cut the answer to max_tokens by the estimate, as a model stops at its max_tokens; True when it
    was cut (finish_reason "length"). The cut falls between words when there are any, else between
    code points: an input without spaces gets a bounded answer too."""
    if max_tokens is None or count_tokens(text) <= max_tokens:
        return text, False
    limit = max_tokens * BYTES_PER_TOKEN
    kept = ""
    for word in text.split():
        candidate = f"{kept} {word}" if kept else word
        if len(candidate.encode("utf-8")) > limit:
            break
        kept = candidate
    if not kept:
        kept = text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")
    return kept, True


def completion(request: ChatRequest, *, broken: bool = False) -> Reply:
    """A chat.completion object answering the request (`broken`: a structured answer off its schema)."""
    content, cut = truncate(answer(request, broken=broken), request.max_tokens)
    prompt_tokens, completion_tokens = request.prompt_tokens, count_tokens(content)
    body = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "system_fingerprint": "fp_outlast_local",
        "service_tier": request.served_tier,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": "length" if cut else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": request.cached_tokens},
        },
    }
    return Reply(200, body)
