"""DeliveryQueue on SQS: the webhooks queue and its DLQ.

Any SQS error surfaces as StorageUnavailableError: the notifier's record, or the sender's
message, is then retried whole (deliveries are at least once; see shared.webhooks.deliveries).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from shared.errors import StorageUnavailableError
from shared.webhooks.endpoints import DeliveryMessage

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

SQS_BATCH_LIMIT = 10


@contextmanager
def _queue_errors() -> Iterator[None]:
    try:
        yield
    except (ClientError, BotoCoreError) as error:
        raise StorageUnavailableError("The webhooks queue did not take the request.") from error


class SqsDeliveryQueue:
    """Sends deliveries, delays their retries, parks them on the DLQ; takes an injected client.

    The notifier's instance needs only `queue_url` (it may only send); the sender's both.
    """

    def __init__(self, client: SQSClient, queue_url: str, dlq_url: str | None = None) -> None:
        self._client = client
        self._queue_url = queue_url
        self._dlq_url = dlq_url

    def send_batch(self, messages: list[DeliveryMessage]) -> None:
        """SendMessageBatch in chunks of 10; StorageUnavailableError if any entry was refused."""
        for start in range(0, len(messages), SQS_BATCH_LIMIT):
            chunk = messages[start : start + SQS_BATCH_LIMIT]
            entries: list[SendMessageBatchRequestEntryTypeDef] = [
                {"Id": str(index), "MessageBody": message.encode()} for index, message in enumerate(chunk)
            ]
            with _queue_errors():
                response = self._client.send_message_batch(QueueUrl=self._queue_url, Entries=entries)
            if response.get("Failed"):
                raise StorageUnavailableError("The webhooks queue refused some deliveries.")

    def change_visibility(self, receipt_handle: str, seconds: int) -> None:
        """ChangeMessageVisibility: the message comes back after `seconds`."""
        with _queue_errors():
            self._client.change_message_visibility(
                QueueUrl=self._queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
            )

    def dead_letter(self, body: str, reason: str) -> None:
        """SendMessage to the DLQ, the reason as the `reason` attribute (what `webhooks redrive` shows)."""
        if self._dlq_url is None:
            raise RuntimeError("this queue adapter was built without the DLQ")
        with _queue_errors():
            self._client.send_message(
                QueueUrl=self._dlq_url,
                MessageBody=body,
                MessageAttributes={"reason": {"DataType": "String", "StringValue": str(reason)}},
            )
