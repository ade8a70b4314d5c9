"""DeadLetterQueue on SQS: a queue's DLQ, for the messages its consumer can never process."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from shared.adapters.dynamo_errors import storage_errors

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class SqsDeadLetterQueue:
    """Parks a message on the DLQ with why; the SQS client is made on first use (a factory), as
    most invocations never park anything."""

    def __init__(self, sqs_factory: Callable[[], SQSClient], dlq_url: str) -> None:
        self._sqs_factory = sqs_factory
        self._dlq_url = dlq_url

    def dead_letter(self, body: str, reason: str) -> None:
        """SendMessage to the DLQ, the reason as the `reason` attribute."""
        with storage_errors():
            self._sqs_factory().send_message(
                QueueUrl=self._dlq_url,
                MessageBody=body,
                MessageAttributes={"reason": {"DataType": "String", "StringValue": reason}},
            )
