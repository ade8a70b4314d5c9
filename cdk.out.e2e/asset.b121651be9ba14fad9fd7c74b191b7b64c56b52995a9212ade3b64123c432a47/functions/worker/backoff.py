"""How long a transiently failed job waits before its next attempt."""

from __future__ import annotations

import math
from collections.abc import Callable


def backoff_seconds(
    attempts: int,
    base: float,
    cap: float,
    provider_hint: float | None,
    random: Callable[[], float],
) -> int:
    """Exponential backoff with equal jitter, never shorter than the provider's Retry-After.

    attempts counts claims so far (1 after the first call). Whole seconds, at least 1: the
    delay becomes an SQS visibility timeout, which has one-second resolution.
    """
    exponential = min(cap, base * 2.0 ** max(0, attempts - 1))
    jittered = exponential / 2 + random() * exponential / 2
    if provider_hint is not None:
        jittered = max(jittered, provider_hint)
    return max(1, math.ceil(jittered))
