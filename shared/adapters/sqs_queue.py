"""JobQueue on SQS: the jobs queue and its dead-letter queue."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from shared.adapters.dynamo_errors import storage_errors
from shared.errors import StorageUnavailableError
from shared.ports import JobMessage
from shared.resources import MAX_DELAY_SECONDS

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef, SendMessageBatchRequestEntryTypeDef

SQS_BATCH_LIMIT = 10


def _group(message: JobMessage) -> str:
    # Every job message carries its tenant's group (DESIGN.md, "Fairness between tenants"): a
    # message without one would be a tenant of its own to the fair queue, jumping the line.
    if not message.group:
        raise ValueError("a job message is sent with its tenant's MessageGroupId")
    return message.group


def encode_message(message: JobMessage) -> str:
    """The wire form of a job message: the job id and a trace id, nothing else."""
    return json.dumps({"jobId": message.job_id, "traceId": message.trace_id}, separators=(",", ":"))


class SqsJobQueue:
    """Sends, delays and parks job messages; takes an injected SQS client."""

    def __init__(self, client: SQSClient, queue_url: str, dlq_url: str | None = None) -> None:
        self._client = client
        self._queue_url = queue_url
        self._dlq_url = dlq_url

    def send_batch(self, messages: list[JobMessage]) -> list[JobMessage]:
        """SendMessageBatch in chunks of 10; a partly failed chunk reports only its failed entries.

        A chunk whose call fails outright (throttled, denied) is reported whole, and the next
        chunk is still tried: one bad call never fails more than its own ten messages.
        """
        failed: list[JobMessage] = []
        for start in range(0, len(messages), SQS_BATCH_LIMIT):
            chunk = messages[start : start + SQS_BATCH_LIMIT]
            entries: list[SendMessageBatchRequestEntryTypeDef] = [
                {"Id": str(index), "MessageBody": encode_message(message), "MessageGroupId": _group(message)}
                for index, message in enumerate(chunk)
            ]
            try:
                with storage_errors():
                    response = self._client.send_message_batch(QueueUrl=self._queue_url, Entries=entries)
            except (StorageUnavailableError, ClientError):
                failed.extend(chunk)
                continue
            failed.extend(chunk[int(entry["Id"])] for entry in response.get("Failed", []))
        return failed

    def send(self, message: JobMessage, delay_seconds: int = 0) -> None:
        """Send one message in its tenant's group, delayed at most MAX_DELAY_SECONDS (SQS's limit)."""
        with storage_errors():
            self._client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=encode_message(message),
                MessageGroupId=_group(message),
                DelaySeconds=max(0, min(delay_seconds, MAX_DELAY_SECONDS)),
            )

    def send_to_dlq(self, body: str, reason: str, job_id: str | None) -> None:
        """Park a message that can never succeed, with why, so on-call sees it without retries."""
        if self._dlq_url is None:
            raise RuntimeError("this queue adapter was built without a DLQ")
        attributes: dict[str, MessageAttributeValueTypeDef] = {
            "reason": {"DataType": "String", "StringValue": reason}
        }
        if job_id is not None:
            attributes["jobId"] = {"DataType": "String", "StringValue": job_id}
        with storage_errors():
            self._client.send_message(QueueUrl=self._dlq_url, MessageBody=body, MessageAttributes=attributes)
