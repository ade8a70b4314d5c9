"""The token bill (DESIGN.md, "Cost tiers"): one reference workload, priced per model and tier.

Tokens, not infrastructure, are most of a job's cost. The workload runs once through the real
handlers (moto, the local model server, which reports cached tokens for a repeated prompt prefix
of 1,024 tokens or more as OpenAI does); its measured tokens are then priced with
docs/model-prices.json at every model/tier pair the table offers. A tier does not change the
tokens, only their price and how long the worker waits for them.

The reference workload (REFERENCE below): 8 summaries of distinct 20 KB documents, 2 summaries of
distinct 200 KB documents (each planned in map steps and a reduce), and each 200 KB document
summarized a second time (a re-run, whose prompts repeat the first run's): 12 jobs.

The worker's wait on the model is not measured here (the local model answers at once): it is
priced from the measured model calls per job and an assumed seconds per call per tier
(CALL_SECONDS, stated in the report), at the worker's memory from the template, shared by the
jobs of one batch (WAIT_SHARING, the worker's batch of 10 run concurrently).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from infra.prices import read_price_table
from outlast.bench.cost import run_lifecycle
from outlast.bench.harness import Harness
from outlast.bench.prices import PriceTable
from outlast.documents import long_document
from shared.prices import PriceTable as ModelPriceTable
from shared.tiers import Tier


@dataclass(frozen=True)
class Batch:
    """Jobs of one size in the reference workload."""

    name: str
    jobs: int
    document_bytes: int
    runs: int  # 2: every document is summarized twice (the second run repeats the prompts)


REFERENCE = (Batch("summary-20kb", 8, 20_000, 1), Batch("summary-200kb", 2, 200_000, 2))
SMOKE_REFERENCE = (Batch("summary-20kb", 2, 20_000, 1), Batch("summary-200kb", 1, 60_000, 2))
# Assumed seconds the worker waits per model call (not measured: the local model answers at once).
# Flex is slower by design; OpenAI states no figure, so this doubles standard's. A batch call keeps
# no worker waiting at all: the claim hands it to the batcher and ends (DESIGN.md, "Cost tiers").
CALL_SECONDS = {Tier.STANDARD: 4.0, Tier.FLEX: 8.0, Tier.BATCH: 0.0}
WAIT_SHARING = 10  # jobs of one worker batch waiting concurrently (the cost section's batch)


@dataclass
class Measured:
    """The workload's tokens and model calls, as the jobs' status documents report them."""

    jobs: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0

    def add(self, documents: list[dict[str, Any]], calls: int) -> None:
        for document in documents:
            usage = document["usage"]
            self.jobs += 1
            self.input_tokens += usage["inputTokens"]
            self.cached_input_tokens += usage["cachedInputTokens"]
            self.output_tokens += usage["outputTokens"]
        self.model_calls += calls


def run(
    h: Harness,
    prices: PriceTable,
    *,
    workload: tuple[Batch, ...] = REFERENCE,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Run the workload, then price it per model and tier; the section of the report."""
    measured = Measured()
    for batch in workload:
        text = "Document {index}. " + long_document(batch.document_bytes)
        for run_number in range(1, batch.runs + 1):
            say(f"tokens: {batch.jobs} x {batch.name}, run {run_number} of {batch.runs}")
            lifecycle = run_lifecycle(h, f"tokens-{batch.name}-{run_number}", batch.jobs, text=text)
            measured.add(lifecycle.documents, len(lifecycle.model_calls))
    memory_gb = h.functions["worker"].memory_mb / 1024
    return {
        "method": (
            "the reference workload through submit, relay and worker (moto, the local model server) at the "
            "standard tier; its tokens from the jobs' usage; dollars per 1,000 jobs of the workload's mix "
            "from docs/model-prices.json for every model/tier pair it offers; the worker's model wait from "
            "the measured calls per job x the assumed seconds per call, at the worker's memory, shared by "
            f"a batch of {WAIT_SHARING}, priced at Lambda's arm64 GB-second"
        ),
        "workload": [batch.__dict__ for batch in workload],
        "jobs": measured.jobs,
        "perJob": {
            "inputTokens": round(measured.input_tokens / measured.jobs, 1),
            "cachedInputTokens": round(measured.cached_input_tokens / measured.jobs, 1),
            "outputTokens": round(measured.output_tokens / measured.jobs, 1),
            "modelCalls": round(measured.model_calls / measured.jobs, 2),
        },
        "cachedShare": round(measured.cached_input_tokens / measured.input_tokens, 4)
        if measured.input_tokens
        else 0,
        "callSecondsAssumed": {tier.value: seconds for tier, seconds in CALL_SECONDS.items()},
        "workerMemoryGb": memory_gb,
        "tiers": _priced(read_price_table(), prices, measured, memory_gb),
    }


def _priced(
    table: ModelPriceTable, prices: PriceTable, measured: Measured, memory_gb: float
) -> list[dict[str, Any]]:
    rows = []
    per_thousand = 1000 / measured.jobs
    calls_per_job = measured.model_calls / measured.jobs
    for model, by_tier in table.models.items():
        for tier, price in by_tier.items():
            tokens_usd = price.cost(
                measured.input_tokens, measured.cached_input_tokens, measured.output_tokens
            )
            gb_seconds = memory_gb * calls_per_job * CALL_SECONDS[tier] / WAIT_SHARING
            rows.append(
                {
                    "model": model,
                    "tier": tier.value,
                    "tokenUsdPer1000Jobs": round(tokens_usd * per_thousand, 4),
                    "tokenUsdPer1000JobsWithoutCache": round(
                        price.cost(measured.input_tokens, 0, measured.output_tokens) * per_thousand, 4
                    ),
                    "waitGbSecondsPerJob": round(gb_seconds, 3),
                    "waitUsdPer1000Jobs": round(prices.cost("lambdaArmGbSecond", gb_seconds) * 1000, 4),
                }
            )
    return rows
