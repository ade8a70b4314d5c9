"""The relay: INSERTs of job items -> one message each; partial failures reported by sequence number."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from functions.relay.service import relay_records
from shared import resources as r
from shared.adapters.sqs_queue import SqsJobQueue, encode_message
from shared.ports import JobMessage

TRACE = "1-67a1b2c3-abcdef0123456789abcdef01"
TENANT = "acme"


def stream_record(
    sequence: str, *, event: str = "INSERT", item_type: str = r.JOB_ITEM_TYPE, job_id: str | None = None
) -> dict[str, Any]:
    """One DynamoDB stream record (NEW_IMAGE) as Lambda delivers it."""
    job_id = job_id or str(uuid.uuid4())
    image = {
        r.PARTITION_KEY: {"S": f"JOB#{job_id}"},
        r.SORT_KEY: {"S": item_type.upper()},
        r.TYPE_ATTRIBUTE: {"S": item_type},
        "jobId": {"S": job_id},
        "status": {"S": "Pending"},
        r.LIST_INDEX_PARTITION: {"S": f"{TENANT}#user-1"},
    }
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": event,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": 1_767_225_600,
            "Keys": {k: image[k] for k in (r.PARTITION_KEY, r.SORT_KEY)},
            "NewImage": image,
            "SequenceNumber": sequence,
            "SizeBytes": 120,
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/jobs/stream/2026-01-01T00:00:00.000",
    }


def job_id_of(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["NewImage"]["jobId"]["S"])


class FakeJobQueue:
    """JobQueue in memory: remembers every send_batch; accepts everything."""

    def __init__(self) -> None:
        self.batches: list[list[JobMessage]] = []

    def send_batch(self, messages: list[JobMessage]) -> list[JobMessage]:
        # As SqsJobQueue: every job message goes out in its tenant's group.
        assert all(m.group for m in messages), "a job message is sent with its tenant's MessageGroupId"
        self.batches.append(list(messages))
        return [m for m in messages if self.rejects(m)]

    def rejects(self, message: JobMessage) -> bool:
        return False

    @property
    def sent(self) -> list[JobMessage]:
        return [m for batch in self.batches for m in batch if not self.rejects(m)]

    def send(self, message: JobMessage, delay_seconds: int = 0) -> None:
        raise AssertionError("the relay sends in batches only")

    def send_to_dlq(self, body: str, reason: str, job_id: str | None) -> None:
        raise AssertionError("the relay never parks messages")


class RejectingQueue(FakeJobQueue):
    """SQS accepted the call but failed some entries (SendMessageBatch's `Failed`)."""

    def __init__(self, rejected_job_ids: set[str]) -> None:
        super().__init__()
        self.rejected_job_ids = rejected_job_ids

    def rejects(self, message: JobMessage) -> bool:
        return message.job_id in self.rejected_job_ids


class TestWhatIsDispatched:
    def test_each_inserted_job_item_becomes_one_message_in_stream_order(self) -> None:
        # Given three new jobs
        records = [stream_record(str(100 + n)) for n in range(3)]
        queue = FakeJobQueue()

        # When the batch is relayed
        response = relay_records(records, queue, TRACE)

        # Then one message each, the job id and the invocation's trace id only, and no failure
        assert queue.sent == [
            JobMessage(job_id=job_id_of(rec), trace_id=TRACE, group=TENANT) for rec in records
        ]
        assert response == {"batchItemFailures": []}

    @pytest.mark.parametrize(
        "other",
        [
            pytest.param({"event": "MODIFY"}, id="modify"),
            pytest.param({"event": "REMOVE"}, id="remove"),
            pytest.param({"item_type": r.INPUT_ITEM_TYPE}, id="input-item"),
            pytest.param({"item_type": r.RESULT_ITEM_TYPE}, id="result-item"),
            pytest.param({"job_id": "not-a-uuid"}, id="job-id-not-a-uuid"),
        ],
    )
    def test_anything_but_an_insert_of_a_job_item_is_skipped(self, other: dict[str, str]) -> None:
        # Given a batch with one job INSERT and one record the filter would have dropped
        wanted = stream_record("200")
        records = [stream_record("199", **other), wanted]
        queue = FakeJobQueue()

        # When it is relayed (local replays may skip the event source filter)
        response = relay_records(records, queue, TRACE)

        # Then only the job INSERT was dispatched, and the other is not a failure either
        assert queue.sent == [JobMessage(job_id=job_id_of(wanted), trace_id=TRACE, group=TENANT)]
        assert response == {"batchItemFailures": []}

    def test_an_uppercase_job_id_is_dispatched_in_canonical_form(self) -> None:
        job_id = str(uuid.uuid4())
        queue = FakeJobQueue()

        relay_records([stream_record("300", job_id=job_id.upper())], queue, TRACE)

        assert queue.sent == [JobMessage(job_id=job_id, trace_id=TRACE, group=TENANT)]

    @pytest.mark.parametrize(
        "unreadable",
        [
            pytest.param({"eventName": "INSERT"}, id="no-dynamodb"),
            pytest.param({"eventName": "INSERT", "dynamodb": {"NewImage": {}}}, id="no-sequence-number"),
            pytest.param({"dynamodb": {"SequenceNumber": "7"}}, id="no-event-name"),
            pytest.param({"eventName": "INSERT", "dynamodb": {"SequenceNumber": ""}}, id="empty-sequence"),
            pytest.param(
                {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "8", "NewImage": "garbage"}},
                id="image-not-a-map",
            ),
        ],
    )
    def test_an_unreadable_record_is_skipped_not_retried(self, unreadable: dict[str, Any]) -> None:
        # Given an unreadable record between two good ones
        first, last = stream_record("400"), stream_record("402")
        queue = FakeJobQueue()

        # When the batch is relayed
        response = relay_records([first, unreadable, last], queue, TRACE)

        # Then the good ones went out and the bad one does not block the shard
        assert [m.job_id for m in queue.sent] == [job_id_of(first), job_id_of(last)]
        assert response == {"batchItemFailures": []}

    def test_an_empty_batch_sends_nothing_and_fails_nothing(self) -> None:
        queue = FakeJobQueue()

        assert relay_records([], queue, TRACE) == {"batchItemFailures": []}
        assert queue.sent == []


class TestPartialFailure:
    def test_only_the_rejected_messages_are_reported_by_sequence_number(self) -> None:
        # Given five jobs, two of which SQS refuses
        records = [stream_record(str(500 + n)) for n in range(5)]
        queue = RejectingQueue({job_id_of(records[1]), job_id_of(records[3])})

        # When the batch is relayed
        response = relay_records(records, queue, TRACE)

        # Then exactly those two sequence numbers are reported; the others were sent
        assert response == {"batchItemFailures": [{"itemIdentifier": "501"}, {"itemIdentifier": "503"}]}
        assert [m.job_id for m in queue.sent] == [job_id_of(records[n]) for n in (0, 2, 4)]

    def test_skipped_records_are_never_reported_as_failures(self) -> None:
        # Given a rejected job next to records the relay skips
        job = stream_record("601")
        records = [stream_record("600", event="MODIFY"), job, stream_record("602", item_type="input")]
        queue = RejectingQueue({job_id_of(job)})

        response = relay_records(records, queue, TRACE)

        assert response == {"batchItemFailures": [{"itemIdentifier": "601"}]}

    def test_everything_rejected_reports_every_dispatch(self) -> None:
        records = [stream_record(str(700 + n)) for n in range(3)]
        queue = RejectingQueue({job_id_of(rec) for rec in records})

        response = relay_records(records, queue, TRACE)

        assert response == {"batchItemFailures": [{"itemIdentifier": str(700 + n)} for n in range(3)]}


class FakeSqsClient:
    """The two SendMessageBatch answers that matter: some entries failed, or the whole call did."""

    def __init__(self, failed_ids: dict[int, set[str]] | None = None, broken_calls: set[int] | None = None):
        self.calls: list[dict[str, Any]] = []
        self.failed_ids = failed_ids or {}
        self.broken_calls = broken_calls or set()

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> dict[str, Any]:  # noqa: N803
        call = len(self.calls)
        self.calls.append({"QueueUrl": QueueUrl, "Entries": Entries})
        if call in self.broken_calls:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "denied"}}, "SendMessageBatch")
        failed = self.failed_ids.get(call, set())
        return {
            "Successful": [
                {"Id": e["Id"], "MessageId": uuid.uuid4().hex, "MD5OfMessageBody": ""}
                for e in Entries
                if e["Id"] not in failed
            ],
            "Failed": [
                {"Id": e["Id"], "SenderFault": False, "Code": "InternalError"}
                for e in Entries
                if e["Id"] in failed
            ],
        }


def messages(count: int) -> list[JobMessage]:
    return [JobMessage(job_id=str(uuid.uuid4()), trace_id=TRACE, group=TENANT) for _ in range(count)]


class TestSendBatchChunking:
    def test_messages_go_out_in_chunks_of_ten(self) -> None:
        # Given 25 messages
        client = FakeSqsClient()
        queue = SqsJobQueue(client, "https://sqs.example/jobs")  # type: ignore[arg-type]
        sent = messages(25)

        # When they are sent
        failed = queue.send_batch(sent)

        # Then three calls of 10, 10 and 5, each entry one encoded message, ids unique per call
        assert failed == []
        assert [len(c["Entries"]) for c in client.calls] == [10, 10, 5]
        bodies = [e["MessageBody"] for c in client.calls for e in c["Entries"]]
        assert bodies == [encode_message(m) for m in sent]
        assert json.loads(bodies[0]) == {"jobId": sent[0].job_id, "traceId": TRACE}
        for call in client.calls:
            assert len({e["Id"] for e in call["Entries"]}) == len(call["Entries"])

    def test_failed_entries_of_a_chunk_map_back_to_their_messages(self) -> None:
        # Given SQS failing entry 3 of the second chunk and entry 0 of the third
        client = FakeSqsClient(failed_ids={1: {"3"}, 2: {"0"}})
        queue = SqsJobQueue(client, "https://sqs.example/jobs")  # type: ignore[arg-type]
        sent = messages(23)

        # Then exactly messages 13 and 20 are reported
        assert queue.send_batch(sent) == [sent[13], sent[20]]

    def test_a_chunk_whose_call_fails_is_reported_whole_and_the_next_is_still_tried(self) -> None:
        client = FakeSqsClient(broken_calls={0})
        queue = SqsJobQueue(client, "https://sqs.example/jobs")  # type: ignore[arg-type]
        sent = messages(15)

        assert queue.send_batch(sent) == sent[:10]
        assert len(client.calls) == 2

    def test_the_relay_reports_chunk_failures_by_sequence_number(self) -> None:
        # Given 12 new jobs relayed through the SQS adapter, whose first call fails entry 9 and
        # whose second call fails outright
        records = [stream_record(str(1000 + n)) for n in range(12)]
        client = FakeSqsClient(failed_ids={0: {"9"}}, broken_calls={1})
        queue = SqsJobQueue(client, "https://sqs.example/jobs")  # type: ignore[arg-type]

        # When the batch is relayed
        response = relay_records(records, queue, TRACE)

        # Then the failed entry and the whole failed chunk are reported, nothing else
        assert response == {"batchItemFailures": [{"itemIdentifier": s} for s in ("1009", "1010", "1011")]}
