"""The batch tier's ports (DESIGN.md, "Cost tiers"): the provider's Batch API, the open batches the
poller sees through, and the queue the worker hands calls to the batcher by."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from shared.batches import BatchCall, BatchIntent, OpenBatch, OpenEntries, ProviderBatch


class BatchApi(Protocol):
    """The provider's Batch API (OpenAI's `/v1/files` and `/v1/batches`)."""

    def create(self, model: str, input_file: bytes, metadata: dict[str, str]) -> ProviderBatch:
        """Upload the JSONL file and create its batch (completion window 24h)."""
        ...

    def retrieve(self, batch_id: str) -> ProviderBatch:
        """The batch as it stands."""
        ...

    def cancel(self, batch_id: str) -> None:
        """Ask the provider to stop the batch (what it answered already is billed)."""
        ...

    def lines(self, file_id: str) -> list[dict[str, Any]]:
        """The lines of a batch's file (input, output or errors), parsed."""
        ...

    def find(self, key: str, value: str, since: datetime) -> list[ProviderBatch]:
        """The batches created at or after `since` whose metadata maps `key` to `value`, newest
        first (the provider lists newest first: the look-up stops at the first batch older)."""
        ...


class OpenBatchStore(Protocol):
    """The batches not yet seen through, and the batcher's intents of batches it is creating (a
    table that holds nothing else)."""

    def put(self, batch: OpenBatch) -> None:
        """Record a batch just created."""
        ...

    def put_orphan(self, batch: OpenBatch) -> bool:
        """Record an orphaned batch unless its id is recorded already (its batcher recorded it
        before it died): True when this call wrote it."""
        ...

    def list_open(self, limit: int) -> OpenEntries:
        """Up to `limit` entries: open batches and intents."""
        ...

    def delete(self, batch_id: str) -> None:
        """The batch is seen through: every job in it moved on."""
        ...

    def put_intent(self, intent: BatchIntent) -> None:
        """Record a batch about to be created (before the provider's create)."""
        ...

    def delete_intent(self, intent_id: str) -> None:
        """The intent's batch is recorded under its provider id, or known never to exist."""
        ...


class BatchCallQueue(Protocol):
    """The batcher's queue."""

    def send(self, calls: list[BatchCall]) -> None:
        """Send each call as one message; raise when any was not accepted."""
        ...
