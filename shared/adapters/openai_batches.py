"""BatchApi on OpenAI's `/v1/files` and `/v1/batches`, through the openai SDK (an injected client)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from shared.batches import CHAT_ENDPOINT, COMPLETION_WINDOW, ProviderBatch

if TYPE_CHECKING:
    import openai


# Batches asked for per page of a look-up (OpenAI's list allows 1 to 100).
_PAGE = 100


class OpenAIBatchApi:
    """Uploads input files, creates, retrieves, cancels and finds batches, reads their files back."""

    def __init__(self, client: openai.OpenAI) -> None:
        self._client = client

    def create(self, model: str, input_file: bytes, metadata: dict[str, str]) -> ProviderBatch:
        """One upload (purpose `batch`), one batch (completion window 24h)."""
        uploaded = self._client.files.create(file=(f"{model}.jsonl", io.BytesIO(input_file)), purpose="batch")
        # No retry of the create itself: a retried create whose first try did reach the provider
        # makes a second batch. One try; on an error the caller fails, its intent stays, and the
        # poller finds whatever batch that try made (functions.batch_poller.intents).
        batch = self._client.with_options(max_retries=0).batches.create(
            input_file_id=uploaded.id,
            endpoint=CHAT_ENDPOINT,
            completion_window=COMPLETION_WINDOW,
            metadata=metadata,
        )
        return _batch(batch)

    def retrieve(self, batch_id: str) -> ProviderBatch:
        """The batch as it stands."""
        return _batch(self._client.batches.retrieve(batch_id))

    def cancel(self, batch_id: str) -> None:
        """Ask the provider to stop the batch."""
        self._client.batches.cancel(batch_id)

    def lines(self, file_id: str) -> list[dict[str, Any]]:
        """The file's JSONL lines, parsed."""
        content = self._client.files.content(file_id).read().decode("utf-8")
        return [json.loads(line) for line in content.splitlines() if line.strip()]

    def find(self, key: str, value: str, since: datetime) -> list[ProviderBatch]:
        """`GET /v1/batches`, newest first, page by page (the SDK follows `after` while `has_more`),
        until the first batch created before `since`."""
        found = []
        for batch in self._client.batches.list(limit=_PAGE):
            if datetime.fromtimestamp(batch.created_at, UTC) < since:
                break
            if (batch.metadata or {}).get(key) == value:
                found.append(_batch(batch))
        return found


def _batch(batch: Any) -> ProviderBatch:
    return ProviderBatch(
        batch_id=batch.id,
        status=batch.status,
        input_file_id=batch.input_file_id,
        output_file_id=batch.output_file_id,
        error_file_id=batch.error_file_id,
    )
