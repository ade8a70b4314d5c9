"""In-memory fakes of the batch tier's ports (shared.batch_ports)."""

from __future__ import annotations

import json
from typing import Any

from shared.batches import OpenBatch, ProviderBatch


class InMemoryOpenBatchStore:
    """Open batches by id, like the table that holds open batches only."""

    def __init__(self) -> None:
        self.batches: dict[str, OpenBatch] = {}

    def put(self, batch: OpenBatch) -> None:
        self.batches[batch.batch_id] = batch

    def list_open(self, limit: int) -> list[OpenBatch]:
        return list(self.batches.values())[:limit]

    def delete(self, batch_id: str) -> None:
        self.batches.pop(batch_id, None)


class FakeBatchApi:
    """Batches a test moves on by hand (`finish`): their input lines, status and output lines."""

    def __init__(self) -> None:
        self.batches: dict[str, ProviderBatch] = {}
        self.files: dict[str, list[dict[str, Any]]] = {}
        self.cancelled: list[str] = []

    def create(self, model: str, input_file: bytes, metadata: dict[str, str]) -> ProviderBatch:
        number = len(self.batches) + 1
        self.files[f"in-{number}"] = [json.loads(line) for line in input_file.decode().splitlines()]
        batch = ProviderBatch(batch_id=f"batch-{number}", status="in_progress", input_file_id=f"in-{number}")
        self.batches[batch.batch_id] = batch
        return batch

    def retrieve(self, batch_id: str) -> ProviderBatch:
        return self.batches[batch_id]

    def cancel(self, batch_id: str) -> None:
        self.cancelled.append(batch_id)
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
