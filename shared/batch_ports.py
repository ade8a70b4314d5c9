"""The batch tier's ports (DESIGN.md, "Cost tiers"): the provider's Batch API, the open batches the
poller sees through, and the queue the worker hands calls to the batcher by."""

from __future__ import annotations

from typing import Any, Protocol

from shared.batches import BatchCall, OpenBatch, ProviderBatch


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


class OpenBatchStore(Protocol):
    """The batches not yet seen through (a table that holds nothing else)."""

    def put(self, batch: OpenBatch) -> None:
        """Record a batch just created."""
        ...

    def list_open(self, limit: int) -> list[OpenBatch]:
        """Up to `limit` open batches."""
        ...

    def delete(self, batch_id: str) -> None:
        """The batch is seen through: every job in it moved on."""
        ...


class BatchCallQueue(Protocol):
    """The batcher's queue."""

    def send(self, calls: list[BatchCall]) -> None:
        """Send each call as one message; raise when any was not accepted."""
        ...
