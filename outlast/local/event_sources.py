"""Event source mappings, emulated: DynamoDB stream -> function and SQS -> function.

They behave like Lambda's pollers where outlast depends on it: batch size and batching
window, filter criteria, partial batch responses (ReportBatchItemFailures), bounded retries
with an on-failure destination for streams, and SQS redrive (moto moves a message to the DLQ
once its receive count passes maxReceiveCount). Local mode builds them from the template;
integration tests build them directly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from outlast.local.fair_queue import FairScheduler

if TYPE_CHECKING:
    from mypy_boto3_dynamodbstreams import DynamoDBStreamsClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import DeleteMessageBatchRequestEntryTypeDef

Invoke = Callable[[dict[str, Any]], Any]
"""Runs the function with an event and returns its response; raises when the function fails."""


class FunctionError(Exception):
    """The function raised or timed out: for Lambda, the whole batch failed."""


_ABSENT = object()


def matches(pattern: Any, value: Any) -> bool:
    """Lambda event filtering, the subset outlast uses: nested objects, lists of allowed values,
    `prefix`, `exists` and `anything-but`."""
    if isinstance(pattern, Mapping):
        if not isinstance(value, Mapping):
            return False
        return all(matches(sub, value.get(key, _ABSENT)) for key, sub in pattern.items())
    if isinstance(pattern, list):
        return any(_matches_one(option, value) for option in pattern)
    return bool(pattern == value)


def _matches_one(option: Any, value: Any) -> bool:
    if isinstance(option, Mapping) and "exists" in option:
        return bool(option["exists"]) == (value is not _ABSENT)
    if value is _ABSENT:
        return False
    if isinstance(option, Mapping) and "prefix" in option:
        return isinstance(value, str) and value.startswith(str(option["prefix"]))
    if isinstance(option, Mapping) and "anything-but" in option:
        # Like Lambda's: a present value that is none of these (an absent one matches nothing).
        excluded = option["anything-but"]
        return value not in (excluded if isinstance(excluded, list) else [excluded])
    return bool(option == value)


def _json_ready(value: Any) -> Any:
    if isinstance(value, datetime):
        return int(value.timestamp())
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_ready(item) for item in value]
    return value


@dataclass
class _ShardState:
    after: str | None = None  # last sequence number handed to the function (or skipped)
    failed_at: str | None = None
    retries: int = 0


@dataclass
class StreamSource:
    """A DynamoDB stream -> function mapping (starting position TRIM_HORIZON)."""

    streams: DynamoDBStreamsClient
    stream_arn: str
    invoke: Invoke
    batch_size: int = 100
    filters: list[dict[str, Any]] = field(default_factory=list)
    max_retries: int = 3
    on_failure: Callable[[dict[str, Any]], object] | None = None
    report_item_failures: bool = True
    _shards: dict[str, _ShardState] = field(default_factory=dict)

    def poll(self) -> int:
        """Deliver what is new on every shard; the number of records handed to the function."""
        delivered = 0
        description = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        for shard in description.get("Shards", []):
            delivered += self._poll_shard(shard["ShardId"])
        return delivered

    def _iterator(self, shard_id: str, state: _ShardState) -> str:
        # A fresh iterator each poll: moto's go stale (DESIGN.md, "moto facts").
        if state.after is None:
            response = self.streams.get_shard_iterator(
                StreamArn=self.stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
            )
        else:
            response = self.streams.get_shard_iterator(
                StreamArn=self.stream_arn,
                ShardId=shard_id,
                ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                SequenceNumber=state.after,
            )
        return str(response["ShardIterator"])

    def _poll_shard(self, shard_id: str) -> int:
        state = self._shards.setdefault(shard_id, _ShardState())
        records = self.streams.get_records(ShardIterator=self._iterator(shard_id, state), Limit=1000)[
            "Records"
        ]
        delivered = 0
        for start in range(0, len(records), self.batch_size):
            batch = [
                _json_ready(dict(record)) | {"eventSourceARN": self.stream_arn}
                for record in records[start : start + self.batch_size]
            ]
            wanted = [
                record
                for record in batch
                if not self.filters or any(matches(f, record) for f in self.filters)
            ]
            if not wanted:
                state.after = batch[-1]["dynamodb"]["SequenceNumber"]
                continue
            failed_at = self._deliver(wanted)
            delivered += len(wanted)
            if failed_at is None:
                state.after, state.failed_at, state.retries = batch[-1]["dynamodb"]["SequenceNumber"], None, 0
                continue
            self._after_failure(shard_id, state, batch, failed_at)
            break  # Lambda blocks the shard on a failure: nothing later goes before it
        return delivered

    def _deliver(self, records: list[dict[str, Any]]) -> str | None:
        """Invoke once; the sequence number to resume from, or None when the batch succeeded."""
        try:
            response = self.invoke({"Records": records})
        except FunctionError:
            return str(records[0]["dynamodb"]["SequenceNumber"])
        failures = (response or {}).get("batchItemFailures", []) if self.report_item_failures else []
        if not failures:
            return None
        return min((str(f["itemIdentifier"]) for f in failures), key=int)

    def _after_failure(
        self, shard_id: str, state: _ShardState, batch: list[dict[str, Any]], failed_at: str
    ) -> None:
        before = [
            r["dynamodb"]["SequenceNumber"]
            for r in batch
            if int(r["dynamodb"]["SequenceNumber"]) < int(failed_at)
        ]
        if before:
            state.after = before[-1]
        state.retries = state.retries + 1 if state.failed_at == failed_at else 1
        state.failed_at = failed_at
        if state.retries <= self.max_retries:
            return
        # Retries exhausted: skip the rest of the batch and record it on the on-failure destination.
        remaining = [r for r in batch if int(r["dynamodb"]["SequenceNumber"]) >= int(failed_at)]
        state.after, state.failed_at, state.retries = remaining[-1]["dynamodb"]["SequenceNumber"], None, 0
        if self.on_failure is not None:
            self.on_failure(
                {
                    "requestContext": {"requestId": str(uuid.uuid4()), "condition": "RetryAttemptsExhausted"},
                    "DDBStreamBatchInfo": {
                        "shardId": shard_id,
                        "startSequenceNumber": failed_at,
                        "endSequenceNumber": state.after,
                        "batchSize": len(remaining),
                        "streamArn": self.stream_arn,
                    },
                }
            )


@dataclass
class _Held:
    """A message received and not yet handed out; `since` is when its visibility last began."""

    message: dict[str, Any]
    since: float

    @property
    def group(self) -> str | None:
        group = self.message.get("Attributes", {}).get("MessageGroupId")
        return str(group) if group is not None else None


@dataclass
class SqsSource:
    """An SQS -> function mapping with ReportBatchItemFailures, delivering as a fair queue.

    The mapping's pollers share one source: what they received waits in one look-ahead buffer
    (at most `lookahead` messages, their visibility extended while they wait, which does not
    count a receive), and the fair-queue scheduler picks each batch from it (see
    outlast.local.fair_queue: an emulation of SQS fair queues as AWS documents them).
    """

    sqs: SQSClient
    queue_url: str
    queue_arn: str
    invoke: Invoke
    batch_size: int = 10
    batching_window_seconds: float = 0.0
    report_item_failures: bool = True
    region: str = "us-east-1"
    lookahead: int = 1000
    scheduler: FairScheduler = field(default_factory=lambda: FairScheduler(time.monotonic))
    _buffer: list[_Held] = field(default_factory=list, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _visibility: float | None = field(default=None, init=False, repr=False)

    def poll(self, idle_sleep: float = 0.2) -> int:
        """Gather one batch (up to batch_size or the batching window) and deliver it.

        Short polls only: moto serializes requests, and a long poll would hold everyone else up.
        """
        messages = self._gather()
        if messages:
            self._deliver(messages)
        else:
            time.sleep(idle_sleep)
        return len(messages)

    def _gather(self) -> list[dict[str, Any]]:
        window_ends = time.monotonic() + self.batching_window_seconds
        while True:
            with self._lock:
                self._refill()
                ready = len(self._buffer)
                if ready >= self.batch_size or (ready and time.monotonic() >= window_ends) or not ready:
                    taken = self.scheduler.take(self._buffer, lambda held: held.group, self.batch_size)
                    for held in taken:
                        self._buffer.remove(held)
                    return [held.message for held in taken]
            time.sleep(min(0.1, max(0.0, window_ends - time.monotonic())))

    def _refill(self) -> None:
        """Receive until the queue has nothing visible or the buffer is full; keep the held visible to us."""
        while len(self._buffer) < self.lookahead:
            response = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(10, self.lookahead - len(self._buffer)),
                WaitTimeSeconds=0,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            received = response.get("Messages", [])
            now = time.monotonic()
            self._buffer.extend(_Held(dict(m), now) for m in received)
            if len(received) < 10:
                break
        self._extend_held()

    def _extend_held(self) -> None:
        # A message held past half its visibility timeout gets a fresh one: it must not come back
        # to another receive while it waits here (a second receive would count as a crash).
        if self._visibility is None:
            attributes = self.sqs.get_queue_attributes(
                QueueUrl=self.queue_url, AttributeNames=["VisibilityTimeout"]
            )["Attributes"]
            self._visibility = float(attributes.get("VisibilityTimeout", 30))
        now = time.monotonic()
        due = [held for held in self._buffer if now - held.since > self._visibility / 2]
        for start in range(0, len(due), 10):
            chunk = due[start : start + 10]
            with contextlib.suppress(Exception):  # a handle gone stale: the message comes back anyway
                self.sqs.change_message_visibility_batch(
                    QueueUrl=self.queue_url,
                    Entries=[
                        {
                            "Id": str(i),
                            "ReceiptHandle": held.message["ReceiptHandle"],
                            "VisibilityTimeout": int(self._visibility),
                        }
                        for i, held in enumerate(chunk)
                    ],
                )
            for held in chunk:
                held.since = now

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        attributes = {
            name: {"stringValue": value.get("StringValue"), "dataType": value.get("DataType", "String")}
            for name, value in message.get("MessageAttributes", {}).items()
        }
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes", {}),
            "messageAttributes": attributes,
            "md5OfBody": message.get("MD5OfBody")
            or hashlib.md5(message["Body"].encode(), usedforsecurity=False).hexdigest(),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": self.region,
        }

    def _deliver(self, messages: list[dict[str, Any]]) -> None:
        started = time.monotonic()
        try:
            response = self.invoke({"Records": [self._record(m) for m in messages]})
        except FunctionError:
            return  # nothing is deleted: every message comes back after its visibility timeout
        finally:
            groups = [m.get("Attributes", {}).get("MessageGroupId") for m in messages]
            self.scheduler.finished(groups, time.monotonic() - started)
        failed = {
            str(f["itemIdentifier"])
            for f in ((response or {}).get("batchItemFailures", []) if self.report_item_failures else [])
        }
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            entries: list[DeleteMessageBatchRequestEntryTypeDef] = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(done[start : start + 10])
            ]
            with contextlib.suppress(Exception):  # a handle gone stale is the same as a late delete
                self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)


def dump(value: Any) -> str:
    """JSON for on-failure destination messages."""
    return json.dumps(value, default=str)


def scheduled_event() -> dict[str, Any]:
    """What an EventBridge schedule sends its target."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-east-1",
        "resources": [],
        "detail": {},
    }
