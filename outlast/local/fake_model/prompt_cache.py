"""The fake model's prompt cache: cached tokens for a repeated prompt prefix, as OpenAI reports them.

OpenAI caches prompts of 1,024 tokens or more, in steps of 128 tokens, and reports the cached part
of a later call's prompt in `usage.prompt_tokens_details.cached_tokens` (billed at the cached input
price). The fake model's tokens are its estimate (4 UTF-8 bytes each), taken over the messages'
text in order, so a prefix of N tokens is the first 4N bytes of that text. Every answered call
leaves its prefixes behind; a later call whose prompt starts with one of them reports the longest.
"""

from __future__ import annotations

import hashlib
import threading

from outlast.local.fake_model.requests import BYTES_PER_TOKEN, ChatRequest, content_text

MIN_CACHED_TOKENS = 1024
CACHE_STEP_TOKENS = 128


class PromptCache:
    """Prefix hashes of every prompt served (per model), thread-safe; nothing expires."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: set[tuple[str, str]] = set()

    def serve(self, request: ChatRequest) -> int:
        """The tokens of the longest cached prefix of this call's prompt (0 below 1,024), then
        remember this prompt's prefixes for later calls."""
        prefixes = _prefix_hashes(request)
        with self._lock:
            cached = max(
                (tokens for tokens, digest in prefixes if (request.model, digest) in self._seen), default=0
            )
            self._seen.update((request.model, digest) for _, digest in prefixes)
        return cached

    def reset(self) -> None:
        """Forget every prefix."""
        with self._lock:
            self._seen.clear()


def _prefix_hashes(request: ChatRequest) -> list[tuple[int, str]]:
    """(tokens, SHA-256) of each cacheable prefix: 1,024 tokens, then every 128 more."""
    text = b"\n".join(content_text(message).encode("utf-8") for message in request.messages)
    hashes: list[tuple[int, str]] = []
    digest = hashlib.sha256()
    done = 0
    tokens = MIN_CACHED_TOKENS
    while tokens * BYTES_PER_TOKEN <= len(text):
        end = tokens * BYTES_PER_TOKEN
        digest.update(text[done:end])
        done = end
        hashes.append((tokens, digest.copy().hexdigest()))
        tokens += CACHE_STEP_TOKENS
    return hashes
