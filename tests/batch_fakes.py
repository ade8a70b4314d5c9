"""In-memory fakes of the batch tier's ports (shared.batch_ports)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from shared.batches import BatchIntent, OpenBatch, OpenEntries, ProviderBatch
from shared.clock import Clock, SystemClock


class InMemoryOpenBatchStore:
    """Open batches and intents by id, like the table that holds nothing else."""

    def __init__(self) -> None:
        self.batches: dict[str, OpenBatch] = {}
        self.intents: dict[str, BatchIntent] = {}

    def put(self, batch: OpenBatch) -> None:
        self.batches[batch.batch_id] = batch

    def put_orphan(self, batch: OpenBatch) -> bool:
        if batch.batch_id in self.batches:
            return False
        self.batches[batch.batch_id] = batch
        return True

    def list_open(self, limit: int) -> OpenEntries:
        entries: list[OpenBatch | BatchIntent] = [*self.batches.values(), *self.intents.values()]
        entries = entries[:limit]
        return OpenEntries(
            batches=tuple(entry for entry in entries if isinstance(entry, OpenBatch)),
            intents=tuple(entry for entry in entries if isinstance(entry, BatchIntent)),
        )

    def delete(self, batch_id: str) -> None:
        self.batches.pop(batch_id, None)

    def put_intent(self, intent: BatchIntent) -> None:
        self.intents[intent.intent_id] = intent

    def delete_intent(self, intent_id: str) -> None:
        self.intents.pop(intent_id, None)


class FakeBatchApi:
    """Batches a test moves on by hand (`finish`): their input lines, status and output lines, their
    metadata, and when they were created (by `clock`)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self.batches: dict[str, ProviderBatch] = {}
        self.files: dict[str, list[dict[str, Any]]] = {}
        self.metadata: dict[str, dict[str, str]] = {}
        self.created: dict[str, datetime] = {}
        self.cancelled: list[str] = []

    def create(self, model: str, input_file: bytes, metadata: dict[str, str]) -> ProviderBatch:
        number = len(self.batches) + 1
        self.files[f"in-{number}"] = [json.loads(line) for line in input_file.decode().splitlines()]
        batch = ProviderBatch(batch_id=f"batch-{number}", status="in_progress", input_file_id=f"in-{number}")
        self.batches[batch.batch_id] = batch
        self.metadata[batch.batch_id] = dict(metadata)
        self.created[batch.batch_id] = self.clock.now()
        return batch

    def find(self, key: str, value: str, since: datetime) -> list[ProviderBatch]:
        newest_first = reversed(self.batches)  # created in order, as the provider lists them
        return [
            self.batches[batch_id]
            for batch_id in newest_first
            if self.created[batch_id] >= since and self.metadata[batch_id].get(key) == value
        ]

    def retrieve(self, batch_id: str) -> ProviderBatch:
        return self.batches[batch_id]

    def cancel(self, batch_id: str) -> None:
        self.cancelled.append(batch_id)
        if not self.batches[batch_id].ended:  # an ended batch stays as it ended
            self.batches[batch_id] = self.batches[batch_id].model_copy(update={"status": "cancelled"})

    def lines(self, file_id: str) -> list[dict[str, Any]]:
        return self.files[file_id]

    def input_lines(self, batch_id: str) -> list[dict[str, Any]]:
        return self.files[self.batches[batch_id].input_file_id]

    def finish(self, batch_id: str, status: str, answers: dict[str, str]) -> None:
        """End the batch: `answers` maps a custom_id to its answer's text (the others get none)."""
        out = f"out-{batch_id}"
        self.files[out] = [
            {
                "custom_id": custom_id,
                "response": {
                    "status_code": 200,
                    "body": {
                        "choices": [{"finish_reason": "stop", "message": {"content": text}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 3},
                    },
                },
                "error": None,
            }
            for custom_id, text in answers.items()
        ]
        update = {"status": status, "output_file_id": out}
        self.batches[batch_id] = self.batches[batch_id].model_copy(update=update)
