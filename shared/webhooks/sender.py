"""The webhook sender's decisions: one attempt per received message, and what follows it.

Per message: the endpoint is loaded (removed or disabled: the message is dropped); a delivery
already recorded as delivered is dropped (a duplicate from a retried stream batch); the egress
guard runs again (resolve, check every address, pin one); the body is signed with a fresh
timestamp by every secret that signs now; one POST; the attempt is recorded. Then:

- 2xx: delivered (the message is deleted).
- 410: the endpoint is disabled (the message is deleted).
- 429 with a Retry-After: the next attempt waits that long, clamped to SQS's 12 h visibility limit.
- Anything else (3xx, 4xx, 5xx, a timeout, a refused connection, a TLS error, a guard refusal):
  the next attempt follows the schedule, about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h (a stage
  setting scales it for local tests), through the message's visibility.
- After the seventh attempt fails, the message goes to the webhooks DLQ (`outlast ops webhooks
  redrive` sends it back once the endpoint is fixed; a redriven message starts the schedule again).

The attempt number is the message's receive count, so a crash or timeout of the sender counts
as an attempt too, and a message received more often than the schedule allows is
dead-lettered without another POST.
"""

from __future__ import annotations

import email.utils
import math
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from shared.clock import Clock
from shared.errors import EgressRefusedError, StorageUnavailableError
from shared.ports import PostResult, WebhookPoster
from shared.webhooks.egress import Resolver, check_url
from shared.webhooks.endpoints import (
    DELIVERY_RETENTION,
    Attempt,
    DeliveryMessage,
    DeliveryState,
    StoredEndpoint,
    UnreadableDeliveryError,
)
from shared.webhooks.ports import DeliveryQueue, EndpointStore
from shared.webhooks.signing import signed_headers

# The waits after attempts 1 to 6 (DESIGN.md, "Webhooks for backends"); attempt 7 is the last.
RETRY_SCHEDULE_SECONDS = (5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600)
MAX_ATTEMPTS = len(RETRY_SCHEDULE_SECONDS) + 1
# SQS refuses a visibility above 12 h, counted from the receive: the sender's own run (at most
# its timeout) is taken off, so the change is never refused.
SQS_MAX_VISIBILITY_SECONDS = 12 * 3600
# The sender's Lambda timeout (infra.constructs.webhooks): ten 10 s attempts run at once in it.
SENDER_TIMEOUT_SECONDS = 60
TOO_MANY_REQUESTS = 429
GONE = 410


class DeadLetterReason(StrEnum):
    """Why a message went to the webhooks DLQ (its `reason` attribute)."""

    ATTEMPTS_EXHAUSTED = "attempts_exhausted"
    UNREADABLE = "unreadable"


class Dropped(StrEnum):
    """Why a message was deleted without an attempt."""

    NO_ENDPOINT = "no_endpoint"  # removed since the event was enqueued
    DISABLED = "disabled"  # disabled (a 410, or an operator)
    NOT_SUBSCRIBED = "not_subscribed"
    ALREADY_DELIVERED = "already_delivered"  # a duplicate of a message that got its 2xx
    DUPLICATE_IN_BATCH = "duplicate_in_batch"  # a second copy in one invocation: the first goes on
    UNREADABLE = "unreadable"  # not a delivery message: parked on the DLQ


@dataclass(frozen=True)
class RetryPolicy:
    """The retry schedule, scaled (`webhookRetryScale`; 1 in AWS), and the visibility ceiling."""

    scale: float = 1.0
    # The sender's timeout: the longest time between a receive and the visibility change.
    run_seconds: int = SENDER_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        if not 0 < self.scale <= 1:
            raise ValueError("the retry scale is above 0 and at most 1")

    @property
    def max_visibility(self) -> int:
        """The longest wait one ChangeMessageVisibility may set."""
        return SQS_MAX_VISIBILITY_SECONDS - self.run_seconds

    def delay_after(self, attempt: int) -> int | None:
        """Seconds to wait after failed attempt `attempt` (1-based), or None when it was the last."""
        if attempt < 1:
            raise ValueError("attempts count from 1")
        if attempt >= MAX_ATTEMPTS:
            return None
        return max(1, round(RETRY_SCHEDULE_SECONDS[attempt - 1] * self.scale))

    def clamp(self, seconds: int) -> int:
        """A wait the receiver asked for, within what SQS allows (at least 1 s)."""
        return min(max(1, seconds), self.max_visibility)


def retry_after_seconds(header: str | None, now: datetime) -> int | None:
    """A Retry-After header as seconds from `now` (delta-seconds or an HTTP date), None if unreadable."""
    if header is None:
        return None
    text = header.strip()
    if text.isascii() and text.isdigit():
        return int(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # an HTTP date is GMT, whether or not it says so
    return max(0, math.ceil((when - now).total_seconds()))


@dataclass(frozen=True)
class Decision:
    """What follows an attempt: its outcome, and for a retry the wait before the next one."""

    outcome: DeliveryState
    delay_seconds: int | None = None


def decide(result: PostResult | None, attempt: int, now: datetime, policy: RetryPolicy) -> Decision:
    """The decision after attempt `attempt`; `result` None means the egress guard refused the send."""
    if result is not None and result.delivered:
        return Decision(DeliveryState.DELIVERED)
    if result is not None and result.status == GONE:
        return Decision(DeliveryState.GONE)
    delay = policy.delay_after(attempt)
    if delay is None:
        return Decision(DeliveryState.DEAD)
    if result is not None and result.status == TOO_MANY_REQUESTS:
        asked = retry_after_seconds(result.retry_after, now)
        if asked is not None:
            delay = policy.clamp(asked)
    return Decision(DeliveryState.RETRYING, delay)


@dataclass(frozen=True)
class SendReport:
    """What one received message came to, for the handler's logs, metrics and batch response."""

    outcome: DeliveryState | None  # None: dropped without an attempt
    dropped: Dropped | None = None
    attempt: Attempt | None = None
    message: DeliveryMessage | None = None
    record_failed: bool = False  # the attempt happened but its record could not be written

    @property
    def retry(self) -> bool:
        """True when the message must come back (its visibility was set to the wait)."""
        return self.outcome is DeliveryState.RETRYING


class RetryLater(Exception):  # noqa: N818 - a signal to the batch processor, not an error
    """Raised by the handler for a message to redeliver after the visibility the sender set."""


class WebhookSender:
    """One attempt per received message, with the endpoint store, the poster and the queue as ports."""

    def batch(self) -> SenderBatch:
        """A view for one invocation's batch (see SenderBatch)."""
        return SenderBatch(self)

    def __init__(
        self,
        store: EndpointStore,
        poster: WebhookPoster,
        queue: DeliveryQueue,
        *,
        resolve: Resolver,
        clock: Clock,
        policy: RetryPolicy,
        local_egress: bool,
    ) -> None:
        self._store = store
        self._poster = poster
        self._queue = queue
        self._resolve = resolve
        self._clock = clock
        self._policy = policy
        # Local mode only (docs/configuration.md): plain http and loopback receivers.
        self._local_egress = local_egress

    def send(self, body: str, receipt_handle: str, receive_count: int) -> SendReport:
        """Attempt the delivery a message carries, and act on the answer (see the module docstring)."""
        try:
            message = DeliveryMessage.decode(body)
        except UnreadableDeliveryError:
            self._queue.dead_letter(body, DeadLetterReason.UNREADABLE)
            return SendReport(None, dropped=Dropped.UNREADABLE)
        if receive_count > MAX_ATTEMPTS:
            # Received more often than the schedule allows (sender crashes): no further POST.
            self._queue.dead_letter(body, DeadLetterReason.ATTEMPTS_EXHAUSTED)
            return SendReport(DeliveryState.DEAD, message=message)
        stored = self._store.get_endpoint(message.endpoint_id)
        dropped = self._why_not(message, stored)
        if dropped is not None or stored is None:
            return SendReport(None, dropped=dropped or Dropped.NO_ENDPOINT, message=message)
        now = self._clock.now()
        result, failure = self._post(stored.endpoint.url, stored.secrets.signing(now), message, now)
        decision = decide(result, receive_count, now, self._policy)
        attempt = Attempt(
            number=receive_count,
            at=now,
            status=result.status if result is not None else None,
            latency_ms=result.latency_ms if result is not None else None,
            failure=failure,
            outcome=decision.outcome,
        )
        self._act(message, decision, receipt_handle, body, now)
        try:
            self._store.record_attempt(message, attempt, now + DELIVERY_RETENTION)
        except StorageUnavailableError:
            # The attempt happened and its consequence is in place; only its record is missing.
            return SendReport(decision.outcome, attempt=attempt, message=message, record_failed=True)
        return SendReport(decision.outcome, attempt=attempt, message=message)

    def _why_not(self, message: DeliveryMessage, stored: StoredEndpoint | None) -> Dropped | None:
        if stored is None or stored.endpoint.tenant != message.tenant:
            return Dropped.NO_ENDPOINT
        if not stored.endpoint.enabled:
            return Dropped.DISABLED
        if not stored.endpoint.hears(message.event_type):
            return Dropped.NOT_SUBSCRIBED
        delivery = self._store.get_delivery(message)
        if delivery is not None and delivery.state is DeliveryState.DELIVERED:
            return Dropped.ALREADY_DELIVERED
        return None

    def _post(
        self, url: str, secrets: list[str], message: DeliveryMessage, now: datetime
    ) -> tuple[PostResult | None, str | None]:
        try:
            destination = check_url(url, self._resolve, local_only=self._local_egress)
        except EgressRefusedError as refusal:
            return None, f"egress:{refusal.reason.value}"
        payload = message.body.encode()
        headers = signed_headers(secrets, message.webhook_id, int(now.timestamp()), payload)
        result = self._poster.post(destination, payload, headers)
        return result, result.failure.value if result.failure is not None else None

    def _act(
        self, message: DeliveryMessage, decision: Decision, receipt_handle: str, body: str, now: datetime
    ) -> None:
        if decision.outcome is DeliveryState.GONE:
            self._store.set_enabled(
                message.endpoint_id, False, f"the receiver answered 410 Gone ({message.webhook_id})", now
            )
        elif decision.outcome is DeliveryState.RETRYING and decision.delay_seconds is not None:
            self._queue.change_visibility(receipt_handle, decision.delay_seconds)
        elif decision.outcome is DeliveryState.DEAD:
            self._queue.dead_letter(body, DeadLetterReason.ATTEMPTS_EXHAUSTED)


class SenderBatch:
    """One invocation's messages, attempted at once: a second copy of a delivery in the same batch
    (duplicate stream records enqueue twice, and both copies often arrive together) is dropped
    before its attempt, so the two never race each other to the receiver. The first copy carries
    on, retries included; copies in different batches meet the delivered record instead."""

    def __init__(self, sender: WebhookSender) -> None:
        self._sender = sender
        self._seen: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()

    def send(self, body: str, receipt_handle: str, receive_count: int) -> SendReport:
        """WebhookSender.send, once per delivery in this batch."""
        try:
            message = DeliveryMessage.decode(body)
        except UnreadableDeliveryError:
            return self._sender.send(body, receipt_handle, receive_count)
        key = (message.endpoint_id, message.webhook_id, message.event_time.isoformat())
        with self._lock:
            if key in self._seen:
                return SendReport(None, dropped=Dropped.DUPLICATE_IN_BATCH, message=message)
            self._seen.add(key)
        return self._sender.send(body, receipt_handle, receive_count)
