"""Reading the DLQ for an operator run: it ends, within the hold, and holds each message once.

The DLQ here is a fake SQS queue on a fake clock: each receive takes `latency` seconds of that
clock, and a received message is visible again once its visibility timeout has passed, as in SQS.
So a slow region is simulated exactly, with no wall-clock threshold in any test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from outlast.operator.dlq import held_messages, listing
from tests.fakes import InMemoryJobRepository

URL = "https://sqs.example/dlq"
# More receives than any test here needs: a read that gets this far never ends by itself.
RUNAWAY = 200


@dataclass
class _Message:
    message_id: str
    body: str
    visible_at: float = 0.0
    receives: int = 0
    handle: str = ""


@dataclass
class SlowDlq:
    """The SQS calls an operator read makes, on a clock that only receives move."""

    latency: float
    messages: list[_Message] = field(default_factory=list)
    clock: float = 0.0
    receive_calls: int = 0
    released: dict[str, str] = field(default_factory=dict)  # receipt handle -> message id

    @classmethod
    def holding(cls, count: int, *, latency: float) -> SlowDlq:
        body = json.dumps({"jobId": "not-a-stored-job", "traceId": "t"})
        return cls(latency, [_Message(f"m-{n:04d}", body) for n in range(count)])

    def monotonic(self) -> float:
        return self.clock

    def receive_message(self, **request: Any) -> dict[str, Any]:
        self.receive_calls += 1
        assert self.receive_calls <= RUNAWAY, "the read never ends"
        self.clock += self.latency
        # Messages that are visible again come first: the worst case for a reader going round.
        visible = sorted(
            (m for m in self.messages if m.visible_at <= self.clock),
            key=lambda m: (m.receives == 0, m.message_id),
        )
        batch = visible[: request["MaxNumberOfMessages"]]
        for message in batch:
            message.receives += 1
            message.handle = f"{message.message_id}/{message.receives}"
            message.visible_at = self.clock + request["VisibilityTimeout"]
        return {"Messages": [self._entry(m) for m in batch]}

    def change_message_visibility_batch(self, **request: Any) -> dict[str, Any]:
        by_handle = {m.handle: m for m in self.messages}
        for entry in request["Entries"]:
            # Only the newest receipt handle of a message counts (an older one is stale).
            message = by_handle[entry["ReceiptHandle"]]
            message.visible_at = self.clock + entry["VisibilityTimeout"]
            self.released[entry["ReceiptHandle"]] = message.message_id
        return {"Successful": [{"Id": e["Id"]} for e in request["Entries"]], "Failed": []}

    def get_queue_attributes(self, **_: Any) -> dict[str, Any]:
        return {"Attributes": {"ApproximateNumberOfMessages": str(len(self.messages))}}

    @staticmethod
    def _entry(message: _Message) -> dict[str, Any]:
        return {
            "MessageId": message.message_id,
            "ReceiptHandle": message.handle,
            "Body": message.body,
            "Attributes": {"ApproximateReceiveCount": str(message.receives), "SentTimestamp": "0"},
        }


def test_a_read_slower_than_its_hold_ends_and_holds_each_message_once() -> None:
    # Given 25 DLQ messages and a receive so slow (13 s) that the 30 s hold of `dlq list` runs out
    # on the first ones before the last are read
    dlq = SlowDlq.holding(25, latency=13)

    # When `dlq list` reads it (the real clock: its deadline is never reached in this test)
    result = listing(
        dlq, URL, InMemoryJobRepository(), datetime(2026, 3, 1, tzinfo=UTC), max_messages=1000, wait_seconds=0
    )

    # Then the read ends once a receive brings back only messages it holds, each listed once
    # and said to be possibly incomplete
    assert dlq.receive_calls == 4
    assert sorted(s.letter.message_id for s in result.steps) == [m.message_id for m in dlq.messages]
    assert result.out_of_time
    assert not result.limit_reached
    # ... and each message is released with its newest receipt handle, so it is visible again
    assert sorted(dlq.released) == sorted(m.handle for m in dlq.messages)
    assert all(m.visible_at <= dlq.clock for m in dlq.messages)


def test_a_re_received_message_keeps_one_letter_with_its_newest_count_and_handle() -> None:
    dlq = SlowDlq.holding(3, latency=40)

    with held_messages(
        dlq, URL, hold_seconds=30, max_messages=1000, wait_seconds=0, monotonic=lambda: 0.0
    ) as hold:
        letters = {letter.message_id: letter.receive_count for letter in hold.letters}

    # The first receive (t=40) took all 3, the second (t=80) got them back: read twice, held once
    assert dlq.receive_calls == 2
    assert letters == {"m-0000": 2, "m-0001": 2, "m-0002": 2}
    assert set(dlq.released) == {"m-0000/2", "m-0001/2", "m-0002/2"}


def test_the_read_stops_at_half_the_hold_so_the_run_can_act_in_time() -> None:
    # Given a DLQ of 1000 messages and a receive of 2 s
    dlq = SlowDlq.holding(1000, latency=2)

    # When a run holding messages for 30 s reads it
    with held_messages(
        dlq, URL, hold_seconds=30, max_messages=1000, wait_seconds=0, monotonic=dlq.monotonic
    ) as hold:
        read = [letter.message_id for letter in hold.letters]
        stopped_at = dlq.clock
        out_of_time = hold.out_of_time

    # Then it stops reading at 15 s (8 receives, none of its messages visible again yet),
    # says more may remain, and releases what it read
    assert (dlq.receive_calls, stopped_at, out_of_time) == (8, 16, True)
    assert len(read) == len(set(read)) == 80
    assert sorted(dlq.released.values()) == sorted(read)


def test_an_empty_receive_ends_a_complete_read() -> None:
    dlq = SlowDlq.holding(12, latency=1)

    with held_messages(
        dlq, URL, hold_seconds=300, max_messages=1000, wait_seconds=0, monotonic=dlq.monotonic
    ) as hold:
        count, out_of_time, limit = len(hold.letters), hold.out_of_time, hold.limit_reached

    assert (dlq.receive_calls, count, out_of_time, limit) == (3, 12, False, False)
