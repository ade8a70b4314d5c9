"""One retry policy for every call the client makes: how often a failed call is tried again, and
after how long. Only idempotent calls come here (a submit is, through its idempotency key)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from outlast.api.http import ApiError, ConnectionLostError

FALLBACK_POLL_SECONDS = 2  # a 429 without Retry-After, and a poll without one
NETWORK_BACKOFF_SECONDS = (1, 2, 4)  # one entry per retry after a lost connection or a 5xx
THROTTLE_RETRIES = 2  # 429s honoured before giving up
MAX_RETRY_DELAY_SECONDS = 60  # a retry is for a brief outage; a longer Retry-After is not waited out
RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})


class WaitTimeoutError(Exception):
    """A deadline passed while a request was still being retried."""


@dataclass(frozen=True)
class Retry:
    """One decision to try a call again: after how long, why, and which retry of how many."""

    delay: float
    reason: str
    number: int
    of: int

    def message(self, what: str) -> str:
        """What the user is told while the call waits."""
        return f"{self.reason}: retrying {what} in {self.delay:.0f} s (retry {self.number} of {self.of})"


@dataclass
class RetryBudget:
    """How many more times a failed call is tried again, and after how long."""

    network: list[int] = field(default_factory=lambda: list(NETWORK_BACKOFF_SECONDS))
    throttled: int = THROTTLE_RETRIES

    def next_retry(self, error: Exception) -> Retry | None:
        """When to try again after `error`, or None to give up."""
        if isinstance(error, ApiError) and error.status == 429:
            if self.throttled <= 0:
                return None
            self.throttled -= 1
            # API Gateway's own throttling sends no Retry-After; the functions' rate_limited does.
            delay = min(error.retry_after or FALLBACK_POLL_SECONDS, MAX_RETRY_DELAY_SECONDS)
            reason = (
                f"rate limited (HTTP 429, asked to wait {error.retry_after} s)"
                if error.retry_after
                else "rate limited (HTTP 429)"
            )
            return Retry(delay, reason, THROTTLE_RETRIES - self.throttled, THROTTLE_RETRIES)
        if isinstance(error, ApiError) and error.status in RETRYABLE_STATUSES:
            reason = f"the API answered HTTP {error.status}"
        elif isinstance(error, ConnectionLostError):
            reason = f"the connection was lost ({error.reason})"
        else:
            return None
        if not self.network:
            return None
        # A 503's Retry-After, when longer than our backoff, is the server's better guess.
        delay = max(self.network.pop(0), (error.retry_after or 0) if isinstance(error, ApiError) else 0)
        total = len(NETWORK_BACKOFF_SECONDS)
        return Retry(min(delay, MAX_RETRY_DELAY_SECONDS), reason, total - len(self.network), total)


def with_retries[T](
    call: Callable[[], T],
    what: str,
    *,
    notify: Callable[[str], None] = lambda _message: None,
    deadline: float | None = None,
) -> T:
    """Run an idempotent call, trying again (bounded) after a lost connection, a 5xx or a 429.

    `notify` hears each retry as a sentence. With a `deadline` (a time.monotonic() value), a
    retry that would start after it starts at it instead, and a retryable failure at or past it
    raises WaitTimeoutError rather than waiting on.
    """
    budget = RetryBudget()
    while True:
        try:
            return call()
        except (ApiError, ConnectionLostError) as error:
            retry = budget.next_retry(error)
            if retry is None:
                raise
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeoutError(f"{what} still failed when the time was up ({error})") from error
                retry = replace(retry, delay=min(retry.delay, left))
            notify(retry.message(what))
            time.sleep(retry.delay)
