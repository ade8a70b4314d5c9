"""BatchCallQueue on SQS: the batcher's queue, one call a message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.adapters.dynamo_errors import storage_errors
from shared.adapters.sqs_queue import SQS_BATCH_LIMIT
from shared.batches import BatchCall
from shared.errors import StorageUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef


class SqsBatchCallQueue:
    """Sends a job's ready calls in SendMessageBatch chunks of 10; takes an injected SQS client."""

    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def send(self, calls: list[BatchCall]) -> None:
        """Every call, or StorageUnavailableError (a call sent twice is one line: shared.batches.by_model)."""
        for start in range(0, len(calls), SQS_BATCH_LIMIT):
            chunk = calls[start : start + SQS_BATCH_LIMIT]
            entries: list[SendMessageBatchRequestEntryTypeDef] = [
                {"Id": str(index), "MessageBody": call.model_dump_json()} for index, call in enumerate(chunk)
            ]
            with storage_errors():
                response = self._client.send_message_batch(QueueUrl=self._queue_url, Entries=entries)
            if response.get("Failed"):
                raise StorageUnavailableError("the batcher's queue refused a call")
