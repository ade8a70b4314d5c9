"""The sender's decisions with fakes: schedule, 2xx, 410, 429 and its clamp, guard refusals, drops."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
from datetime import UTC, datetime, timedelta

import pytest

from shared.errors import StorageUnavailableError
from shared.ports import PostResult, TransportFailure
from shared.webhooks.endpoints import (
    ALL_EVENTS,
    Attempt,
    DeliveryMessage,
    DeliveryState,
    Endpoint,
    EndpointSecrets,
    new_endpoint_id,
)
from shared.webhooks.events import EventType
from shared.webhooks.sender import (
    MAX_ATTEMPTS,
    RETRY_SCHEDULE_SECONDS,
    SQS_MAX_VISIBILITY_SECONDS,
    Dropped,
    RetryPolicy,
    SendReport,
    WebhookSender,
    decide,
    retry_after_seconds,
)
from shared.webhooks.signing import generate_secret, verify
from tests.fakes import FakeClock
from tests.webhook_fakes import InMemoryEndpointStore, RecordingDeliveryQueue, ScriptedPoster, answer

NOW = datetime(2030, 3, 17, 17, 46, 40, 123_000, tzinfo=UTC)
JOB_ID = "6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b"
BODY = '{"type":"job.succeeded","timestamp":"2030-03-17T17:46:40.123Z","data":{}}'
GLOBAL = {"hooks.example": ["93.184.215.14"], "private.example": ["93.184.215.15", "10.0.0.1"]}


def _resolve(host: str, port: int) -> list[str]:
    del port
    return GLOBAL.get(host, [])


class Rig:
    """A sender over fakes, with one endpoint of tenant acme."""

    def __init__(
        self,
        answers: list[PostResult],
        *,
        url: str = "https://hooks.example/outlast",
        scale: float = 1.0,
        local_egress: bool = False,
        enabled: bool = True,
        events: tuple[EventType, ...] = ALL_EVENTS,
    ) -> None:
        self.store = InMemoryEndpointStore()
        self.queue = RecordingDeliveryQueue()
        self.poster = ScriptedPoster(answers=answers)
        self.clock = FakeClock(NOW)
        self.secret = generate_secret()
        self.endpoint = Endpoint(
            endpoint_id=new_endpoint_id(),
            tenant="acme",
            url=url,
            events=events,
            created_at=NOW - timedelta(days=1),
            enabled=enabled,
        )
        self.store.add_endpoint(self.endpoint, EndpointSecrets(current=self.secret))
        self.policy = RetryPolicy(scale=scale, run_seconds=60)
        self.sender = WebhookSender(
            self.store,
            self.poster,
            self.queue,
            resolve=_resolve,
            clock=self.clock,
            policy=self.policy,
            local_egress=local_egress,
        )
        self.message = DeliveryMessage(
            endpoint_id=self.endpoint.endpoint_id,
            tenant="acme",
            webhook_id=f"{JOB_ID}.0.job.succeeded",
            event_type=EventType.JOB_SUCCEEDED,
            job_id=JOB_ID,
            event_time=NOW,
            body=BODY,
        )

    def send(self, receive_count: int = 1) -> SendReport:
        return self.sender.send(self.message.encode(), f"receipt-{receive_count}", receive_count)

    def attempts(self) -> tuple[Attempt, ...]:
        delivery = self.store.get_delivery(self.message)
        return delivery.attempts if delivery else ()


def test_the_schedule_is_5s_5m_30m_2h_5h_10h_then_the_dlq() -> None:
    rig = Rig([answer(500)])

    for attempt in range(1, MAX_ATTEMPTS + 1):
        rig.send(attempt)

    assert [seconds for _, seconds in rig.queue.visibility] == [5, 300, 1800, 7200, 18000, 36000]
    assert list(RETRY_SCHEDULE_SECONDS) == [5, 300, 1800, 7200, 18000, 36000]
    assert rig.queue.dead == [(rig.message.encode(), "attempts_exhausted")]
    assert [a.outcome for a in rig.attempts()] == [DeliveryState.RETRYING] * 6 + [DeliveryState.DEAD]
    assert [a.number for a in rig.attempts()] == list(range(1, 8))
    assert len(rig.poster.requests) == MAX_ATTEMPTS


def test_a_stage_scale_shortens_the_schedule_but_never_below_a_second() -> None:
    policy = RetryPolicy(scale=0.001)

    assert [policy.delay_after(n) for n in range(1, MAX_ATTEMPTS + 1)] == [1, 1, 2, 7, 18, 36, None]
    with pytest.raises(ValueError, match="scale"):
        RetryPolicy(scale=0)
    with pytest.raises(ValueError, match="scale"):
        RetryPolicy(scale=2)


def test_a_2xx_is_delivered_signed_with_a_fresh_timestamp() -> None:
    rig = Rig([answer(204)])

    report = rig.send()

    assert report.outcome is DeliveryState.DELIVERED
    ((destination, body, headers),) = rig.poster.requests
    assert (destination.host, destination.address, destination.port) == (
        "hooks.example",
        "93.184.215.14",
        443,
    )
    assert body == BODY.encode()
    assert headers["webhook-id"] == f"{JOB_ID}.0.job.succeeded"
    assert headers["webhook-timestamp"] == str(int(NOW.timestamp()))
    # The signature, computed here from the spec: base64(HMAC-SHA256(key, "id.timestamp.body")).
    key = base64.b64decode(rig.secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    assert (
        headers["webhook-signature"]
        == "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    )
    assert rig.queue.visibility == []
    assert rig.queue.dead == []
    assert [(a.status, a.outcome, a.latency_ms) for a in rig.attempts()] == [
        (204, DeliveryState.DELIVERED, 12)
    ]


def test_each_retry_signs_again_with_a_new_timestamp_and_the_same_id() -> None:
    rig = Rig([answer(500), answer(500), answer(200)])

    for attempt in (1, 2, 3):
        rig.send(attempt)
        rig.clock.advance(minutes=7)

    ids = {headers["webhook-id"] for _, _, headers in rig.poster.requests}
    stamps = [headers["webhook-timestamp"] for _, _, headers in rig.poster.requests]
    assert ids == {f"{JOB_ID}.0.job.succeeded"}
    assert len(set(stamps)) == 3
    assert rig.store.get_delivery(rig.message).state is DeliveryState.DELIVERED  # type: ignore[union-attr]


def test_a_410_disables_the_endpoint_and_ends_the_delivery() -> None:
    rig = Rig([answer(410)])

    report = rig.send()

    assert report.outcome is DeliveryState.GONE
    stored = rig.store.get_endpoint(rig.endpoint.endpoint_id)
    assert stored is not None
    assert not stored.endpoint.enabled
    assert "410" in (stored.endpoint.disabled_reason or "")
    assert stored.endpoint.disabled_at == NOW
    assert rig.queue.visibility == []
    assert rig.queue.dead == []
    # The next message for it is dropped without a call.
    assert rig.send(2).dropped is Dropped.DISABLED
    assert len(rig.poster.requests) == 1


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [
        ("120", 120),
        ("0", 1),
        ("100000", SQS_MAX_VISIBILITY_SECONDS - 60),  # clamped to SQS's 12 h, less the sender's run
        ("Sun, 17 Mar 2030 18:46:40 GMT", 3600),
        ("soon", 5),  # unreadable: the schedule
        (None, 5),
    ],
)
def test_a_429_honours_retry_after_clamped_to_12_hours(retry_after: str | None, expected: int) -> None:
    rig = Rig([answer(429, retry_after=retry_after)])

    rig.send()

    assert rig.queue.visibility == [("receipt-1", expected)]
    assert [a.outcome for a in rig.attempts()] == [DeliveryState.RETRYING]


def test_a_429_on_the_last_attempt_goes_to_the_dlq() -> None:
    rig = Rig([answer(429, retry_after="60")])

    rig.send(MAX_ATTEMPTS)

    assert rig.queue.visibility == []
    assert [reason for _, reason in rig.queue.dead] == ["attempts_exhausted"]


@pytest.mark.parametrize(
    "result",
    [
        answer(301),
        answer(302),
        answer(400),
        answer(404),
        answer(500),
        answer(503),
        answer(None, failure=TransportFailure.TIMEOUT),
    ],
    ids=["301", "302", "400", "404", "500", "503", "timeout"],
)
def test_redirects_errors_and_timeouts_retry_on_the_schedule(result: PostResult) -> None:
    rig = Rig([result])

    rig.send(3)

    assert rig.queue.visibility == [("receipt-3", 1800)]
    (attempt,) = rig.attempts()
    assert attempt.outcome is DeliveryState.RETRYING


def test_a_guard_refusal_sends_nothing_and_retries_on_the_schedule() -> None:
    rig = Rig([answer(200)], url="https://private.example/hook")  # one of its addresses is 10.0.0.1

    rig.send()

    assert rig.poster.requests == []
    assert rig.queue.visibility == [("receipt-1", 5)]
    (attempt,) = rig.attempts()
    assert (attempt.status, attempt.latency_ms, attempt.failure) == (None, None, "egress:address")


def test_plain_http_and_loopback_need_the_local_only_flag() -> None:
    refused = Rig([answer(200)], url="http://127.0.0.1:8123/hook")
    allowed = Rig([answer(200)], url="http://127.0.0.1:8123/hook", local_egress=True)

    refused.send()
    allowed.send()

    assert refused.poster.requests == []
    assert refused.attempts()[0].failure == "egress:scheme"
    ((destination, _, _),) = allowed.poster.requests
    assert (destination.scheme, destination.address, destination.port) == ("http", "127.0.0.1", 8123)


def test_during_a_rotation_both_secrets_sign_and_each_verifies() -> None:
    rig = Rig([answer(200)])
    stored = rig.store.get_endpoint(rig.endpoint.endpoint_id)
    assert stored is not None
    new = generate_secret()
    rig.store.rotate_secret(rig.endpoint.endpoint_id, rig.secret, stored.secrets.rotated(new, NOW))

    rig.clock.advance(hours=23)
    rig.send()
    rig.clock.advance(hours=1)
    rig.message = dataclasses.replace(rig.message, webhook_id=f"{JOB_ID}.1.job.succeeded")  # a later event
    rig.send()

    (_, body, during), (_, _, after) = rig.poster.requests
    assert len(during["webhook-signature"].split(" ")) == 2
    for secret in (new, rig.secret):
        verify([secret], during, body, now=int(rig.clock.now().timestamp()) - 3600)
    assert len(after["webhook-signature"].split(" ")) == 1
    verify([new], after, body, now=int(rig.clock.now().timestamp()))


@pytest.mark.parametrize(
    ("change", "why"),
    [("disable", Dropped.DISABLED), ("remove", Dropped.NO_ENDPOINT), ("deliver", Dropped.ALREADY_DELIVERED)],
)
def test_disabled_removed_and_delivered_drop_the_message_without_a_call(change: str, why: Dropped) -> None:
    rig = Rig([answer(200)])
    if change == "disable":
        rig.store.set_enabled(rig.endpoint.endpoint_id, False, "operator", NOW)
    elif change == "remove":
        rig.store.remove_endpoint(rig.endpoint.endpoint_id)
    else:
        rig.send()
        rig.poster.requests.clear()

    report = rig.send(2)

    assert report.dropped is why
    assert report.outcome is None
    assert rig.poster.requests == []
    assert rig.queue.visibility == []
    assert rig.queue.dead == []


def test_an_endpoint_no_longer_subscribed_is_dropped() -> None:
    rig = Rig([answer(200)], events=(EventType.JOB_FAILED,))

    assert rig.send().dropped is Dropped.NOT_SUBSCRIBED


def test_a_message_received_more_often_than_the_schedule_allows_is_dead_lettered_unsent() -> None:
    rig = Rig([answer(200)])

    rig.send(MAX_ATTEMPTS + 1)

    assert rig.poster.requests == []
    assert [reason for _, reason in rig.queue.dead] == ["attempts_exhausted"]


def test_an_unreadable_message_is_parked_on_the_dlq() -> None:
    rig = Rig([answer(200)])

    report = rig.sender.send('{"jobId": "nope"}', "r", 1)

    assert report.dropped is Dropped.UNREADABLE
    assert rig.queue.dead == [('{"jobId": "nope"}', "unreadable")]


def test_a_record_that_cannot_be_written_changes_nothing_about_the_delivery() -> None:
    rig = Rig([answer(204)])

    def down(*_: object) -> None:
        raise StorageUnavailableError("down")

    rig.store.record_attempt = down  # type: ignore[method-assign,assignment]

    report = rig.send()

    assert report.outcome is DeliveryState.DELIVERED
    assert report.record_failed


def test_decide_and_retry_after_in_isolation() -> None:
    policy = RetryPolicy()

    assert decide(answer(299), 7, NOW, policy).outcome is DeliveryState.DELIVERED
    assert decide(answer(410), 7, NOW, policy).outcome is DeliveryState.GONE
    assert decide(None, 6, NOW, policy).delay_seconds == 36000
    assert decide(None, 7, NOW, policy).outcome is DeliveryState.DEAD
    assert retry_after_seconds("Sun, 17 Mar 2030 17:46:00 GMT", NOW) == 0  # in the past
    assert retry_after_seconds("Sun, 17 Mar 2030 17:47:00", NOW) == 20  # no zone: read as GMT
    assert retry_after_seconds("-5", NOW) is None
    assert retry_after_seconds("١٢", NOW) is None  # not ASCII digits


def test_a_second_copy_in_one_batch_is_dropped_before_it_races_the_first() -> None:
    rig = Rig([answer(500)])
    batch = rig.sender.batch()

    first = batch.send(rig.message.encode(), "r1", 1)
    second = batch.send(rig.message.encode(), "r2", 1)
    again = rig.sender.batch().send(rig.message.encode(), "r3", 2)  # the next invocation

    assert first.retry
    assert second.dropped is Dropped.DUPLICATE_IN_BATCH
    assert again.retry
    assert len(rig.poster.requests) == 2
