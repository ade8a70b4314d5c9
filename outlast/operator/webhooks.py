"""Operator moves on webhooks: register, rotate, and send deliveries back from the webhooks DLQ.

Registration runs the egress guard first (the sender runs it again before every attempt):
`local_only` is set for the local stack alone, where receivers on 127.0.0.1 over plain http
are allowed. The signing secret is made here, stored, and handed back once to be printed; no
log line ever holds it.

The redrive reads the DLQ with the same hold as `outlast ops dlq redrive` (outlast.operator.dlq:
every message received, hidden while the run lasts, released on the way out), plans each
message against its endpoint and delivery record, and for a redrive sends the body unchanged
to the webhooks queue (same `webhook-id`, a fresh schedule) before deleting it from the DLQ.
An interrupted run leaves at worst a message both on the queue and on the DLQ: the sender drops
the second copy once the first was delivered, and receivers deduplicate by webhook id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from outlast.operator.dispatch import AWS_ERRORS, Result, describe
from outlast.operator.dlq import Hold
from outlast.operator.plan import DeadLetter
from shared.webhooks.egress import Resolver, check_url
from shared.webhooks.endpoints import (
    DeliveryMessage,
    DeliveryState,
    Endpoint,
    EndpointSecrets,
    UnreadableDeliveryError,
    new_endpoint_id,
)
from shared.webhooks.events import EventType
from shared.webhooks.ports import EndpointExistsError, EndpointStore
from shared.webhooks.signing import generate_secret

_ID_ATTEMPTS = 3


def add_endpoint(
    store: EndpointStore,
    tenant: str,
    url: str,
    *,
    events: tuple[EventType, ...],
    now: datetime,
    resolve: Resolver,
    local_only: bool,
) -> tuple[Endpoint, str]:
    """Check the URL (EgressRefusedError says why not), store the endpoint; it and its secret."""
    check_url(url, resolve, local_only=local_only)
    secret = generate_secret()
    for _ in range(_ID_ATTEMPTS):
        endpoint = Endpoint(
            endpoint_id=new_endpoint_id(), tenant=tenant, url=url, events=events, created_at=now
        )
        try:
            store.add_endpoint(endpoint, EndpointSecrets(current=secret))
        except EndpointExistsError:
            continue  # 64 random bits collided: take another id
        return endpoint, secret
    raise RuntimeError("could not find a free endpoint id")  # pragma: no cover - 2^-64 three times


class RotationRefused(Exception):  # noqa: N818 - an answer, not a failure of the command
    """The rotation did not happen; the message says why."""


def rotate(
    store: EndpointStore, endpoint_id: str, now: datetime, *, force: bool
) -> tuple[EndpointSecrets, str]:
    """A new current secret, the old one signing until now + 24 h: the secrets now, and the new one."""
    stored = store.get_endpoint(endpoint_id)
    if stored is None:
        raise RotationRefused(f"no endpoint {endpoint_id}")
    overlap = stored.secrets.previous_until
    if overlap is not None and overlap > now and not force:
        raise RotationRefused(
            f"a rotation's overlap runs until {overlap.isoformat()}: rotating again now stops the "
            "oldest secret from signing at once; rerun with --force if that is what you want"
        )
    secret = generate_secret()
    rotated = stored.secrets.rotated(secret, now)
    if not store.rotate_secret(endpoint_id, stored.secrets.current, rotated):
        raise RotationRefused("the endpoint changed meanwhile (removed, or rotated by someone else): rerun")
    return rotated, secret


# --- redrive ----------------------------------------------------------------------------------


class Action(StrEnum):
    """What a redrive does with one DLQ message."""

    REDRIVE = "redrive"  # sent back to the webhooks queue, deleted from the DLQ
    DROP_REMOVED = "drop-removed"  # its endpoint is gone: nothing could deliver it
    DROP_DELIVERED = "drop-delivered"  # a duplicate: this delivery got its 2xx meanwhile
    KEEP_DISABLED = "keep-disabled"  # its endpoint is disabled: `webhooks enable` first
    KEEP_UNREADABLE = "keep-unreadable"  # not a delivery message: look at it by hand


DISPATCHING = frozenset({Action.REDRIVE})
DROPPING = frozenset({Action.DROP_REMOVED, Action.DROP_DELIVERED})


@dataclass(frozen=True)
class Selection:
    """Which DLQ messages a run touches."""

    everything: bool = False
    endpoint_ids: frozenset[str] = frozenset()
    webhook_ids: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        """True when nothing was asked for."""
        return not (self.everything or self.endpoint_ids or self.webhook_ids)

    def picks(self, message: DeliveryMessage | None) -> bool:
        """True when the run should touch this message (unreadable ones only with --all)."""
        if self.everything:
            return True
        if message is None:
            return False
        return message.endpoint_id in self.endpoint_ids or message.webhook_id in self.webhook_ids


@dataclass(frozen=True)
class Step:
    """One selected DLQ message, what it carries, and what the run will do with it."""

    letter: DeadLetter
    message: DeliveryMessage | None
    endpoint: Endpoint | None
    action: Action
    why: str


def read_message(letter: DeadLetter) -> DeliveryMessage | None:
    """The delivery a DLQ message carries, or None when it is not one."""
    try:
        return DeliveryMessage.decode(letter.body)
    except UnreadableDeliveryError:
        return None


def plan(letters: Sequence[DeadLetter], store: EndpointStore, selection: Selection) -> list[Step]:
    """Each selected message with its endpoint and delivery record, and the action for it."""
    steps = []
    endpoints: dict[str, Endpoint | None] = {}
    for letter in letters:
        message = read_message(letter)
        if not selection.picks(message):
            continue
        if message is None:
            steps.append(Step(letter, None, None, Action.KEEP_UNREADABLE, "not a webhook delivery message"))
            continue
        if message.endpoint_id not in endpoints:
            stored = store.get_endpoint(message.endpoint_id)
            endpoints[message.endpoint_id] = stored.endpoint if stored else None
        endpoint = endpoints[message.endpoint_id]
        steps.append(Step(letter, message, endpoint, *_decide(message, endpoint, store)))
    return steps


def _decide(message: DeliveryMessage, endpoint: Endpoint | None, store: EndpointStore) -> tuple[Action, str]:
    if endpoint is None:
        return Action.DROP_REMOVED, f"endpoint {message.endpoint_id} was removed"
    if not endpoint.enabled:
        return Action.KEEP_DISABLED, (
            f"endpoint disabled ({endpoint.disabled_reason}): `outlast ops webhooks enable "
            f"{endpoint.endpoint_id}` once it answers again, then redrive"
        )
    delivery = store.get_delivery(message)
    if delivery is not None and delivery.state is DeliveryState.DELIVERED:
        return Action.DROP_DELIVERED, "delivered meanwhile (another copy got its 2xx)"
    tries = len(delivery.attempts) if delivery else 0
    return Action.REDRIVE, f"back on the webhooks queue, first attempt at once ({tries} attempt(s) so far)"


@dataclass(frozen=True)
class Outcome:
    """One executed step."""

    step: Step
    result: Result
    detail: str


def run(
    steps: Sequence[Step], hold: Hold, sqs: Any, queue_url: str, report: Callable[[Outcome], None]
) -> list[Outcome]:
    """Carry out the plan step by step: send, then delete (a redrive); delete (a drop); keep."""
    outcomes = []
    for step in steps:
        outcome = _step(step, hold, sqs, queue_url)
        outcomes.append(outcome)
        report(outcome)
    return outcomes


def _step(step: Step, hold: Hold, sqs: Any, queue_url: str) -> Outcome:
    if step.action in DISPATCHING:
        try:
            sqs.send_message(QueueUrl=queue_url, MessageBody=step.letter.body)
        except AWS_ERRORS as error:
            return Outcome(step, Result.FAILED, f"not sent ({describe(error)}); still on the DLQ, rerun")
    elif step.action not in DROPPING:
        return Outcome(step, Result.KEPT, "kept on the DLQ")
    try:
        hold.delete(step.letter.message_id)
    except AWS_ERRORS as error:
        sent = "sent to the webhooks queue, but " if step.action in DISPATCHING else ""
        return Outcome(step, Result.FAILED, f"{sent}not deleted from the DLQ ({describe(error)}); rerun")
    done = "sent to the webhooks queue; DLQ message deleted" if step.action in DISPATCHING else "deleted"
    return Outcome(step, Result.DONE, done)
