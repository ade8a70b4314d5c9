"""After the drain: every provider batch the local model server created was seen through or
cancelled, and the open batches' table is empty (DESIGN.md, "Cost tiers").

A batch its batcher died before recording is billed at the provider and invisible to the poller
unless the batcher's write-ahead intent leads the poller to it (functions.batch_poller.orphans).
So, once the table holds no open batch and no intent (the poller has resolved every intent and
counted every orphan), no batch may still be running at the model server: the local server runs a
batch only when it is retrieved (the poller does that for every batch it knows of), so one still
`in_progress` is one nothing will ever see through, cancel or count.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from openai import OpenAI

from outlast.chaos.target import Target
from outlast.local.access import local_client
from shared.adapters.dynamodb_batches import DynamoOpenBatchStore
from shared.batches import ENDED, INTENT_METADATA_KEY, BatchStatus, OpenEntries

# How long the check waits for the poller to resolve the last intents and orphans: the local
# intent grace (batcherTimeoutSeconds + batchIntentMarginSeconds, 15 s) plus a few polls.
SEEN_THROUGH_WAIT_SECONDS = 90.0
_PAGE = 100


@dataclass
class ProviderBatches:
    """What the model server and the open batches' table say after the drain."""

    created: int = 0  # batches the model server created
    cancelled: int = 0  # of them, cancelled (orphans, and batches whose jobs were all canceled)
    leftovers: list[str] = field(default_factory=list)  # must be empty


def check_provider_batches(target: Target) -> ProviderBatches:
    """Wait (bounded) for the table to empty, then hold every provider batch to having ended."""
    found = ProviderBatches()
    store = DynamoOpenBatchStore(local_client("dynamodb", target.state), target.table("BatchBatchesTable"))
    deadline = time.monotonic() + SEEN_THROUGH_WAIT_SECONDS
    entries = store.list_open(1000)
    while (entries.batches or entries.intents) and time.monotonic() < deadline:
        time.sleep(1)
        entries = store.list_open(1000)
    found.leftovers += _left_open(entries)
    client = OpenAI(api_key="local", base_url=target.model_url + "/v1", max_retries=2)
    for batch in client.batches.list(limit=_PAGE):  # every page: the SDK follows `after`
        found.created += 1
        found.cancelled += batch.status == BatchStatus.CANCELLED.value
        if batch.status not in ENDED:
            found.leftovers.append(_running(batch))
    return found


def _left_open(entries: OpenEntries) -> list[str]:
    return [
        f"open batch {batch.batch_id}{' (orphaned)' if batch.orphaned else ''} still in the table "
        f"for jobs {', '.join(batch.job_ids)}"
        for batch in entries.batches
    ] + [
        f"intent {intent.intent_id} unresolved for jobs {', '.join(intent.job_ids)}"
        for intent in entries.intents
    ]


def _running(batch: Any) -> str:
    intent = (batch.metadata or {}).get(INTENT_METADATA_KEY)
    return f"provider batch {batch.id} (intent {intent}) still {batch.status}: nothing saw it through"
