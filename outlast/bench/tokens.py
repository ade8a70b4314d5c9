"""The token bill (DESIGN.md, "Cost tiers"): one reference workload, priced per model and tier.

Tokens, not infrastructure, are most of a job's cost. The workload runs once through the real
handlers (moto, the local model server, which reports cached tokens for a repeated prompt prefix
of 1,024 tokens or more as OpenAI does); its measured tokens are then priced with
docs/model-prices.json at every model/tier pair the table offers. A tier does not change the
tokens, only their price and how long the worker waits for them.

The reference workload (REFERENCE below): 8 summaries of distinct 20 KB documents, 2 summaries of
distinct 200 KB documents (each planned in map steps and a reduce), and each 200 KB document
summarized a second time (a re-run, whose prompts repeat the first run's): 12 jobs. Every line of
a document names it (distinct_document), so only a re-run's prompts repeat earlier ones.

The workload runs twice. The standard run measures the tokens that the standard and flex rows
price (flex is not run: its rows are the standard run's tokens at flex prices). The worker's wait
on the model is not measured there (the local model answers at once): it is priced from the
measured model calls per job and an assumed seconds per call per tier (CALL_SECONDS, stated in
the report), at the worker's memory from the template, shared by the jobs of one batch
(WAIT_SHARING, the worker's batch of 10 run concurrently). The batch run (outlast.bench.tokens_batch)
takes the same workload through the batch tier end to end: its rows are its own tokens, and its
Lambda time is the measured handler time of the worker (and, beside it, the batcher's and the
poller's) that served its jobs. The two runs' documents differ in one letter on every line
(S, B), so the batch run's prompts are the same size as the standard run's but not served from
the prompt cache that run filled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from infra.names import FunctionName
from infra.prices import read_price_table
from outlast.bench.cost import run_lifecycle
from outlast.bench.harness import Harness
from outlast.bench.prices import PriceTable
from outlast.bench.tokens_batch import BatchMeasured, Measured, compare, handler_seconds, run_batch_lifecycle
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
# no worker waiting (the claim hands it to the batcher and ends): the batch run measures what its
# jobs cost in Lambda instead.
CALL_SECONDS = {Tier.STANDARD: 4.0, Tier.FLEX: 8.0}
WAIT_SHARING = 10  # jobs of one worker batch waiting concurrently (the cost section's batch)
STANDARD_PASS, BATCH_PASS = "tokens-standard-", "tokens-batch-"  # the runs' pass names start so
MAX_JOBS_PER_GROUP = 10  # one digit names each document of a group (distinct_document)


def run(
    h: Harness,
    prices: PriceTable,
    *,
    workload: tuple[Batch, ...] = REFERENCE,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Run the workload at standard, then at batch; price both per model and tier: the section."""
    measured = Measured()
    for batch, run_number, text in _runs(workload, "S"):
        say(f"tokens: {batch.jobs} x {batch.name}, standard run {run_number} of {batch.runs}")
        lifecycle = run_lifecycle(h, f"{STANDARD_PASS}{batch.name}-{run_number}", batch.jobs, text=text)
        measured.add(lifecycle.documents, len(lifecycle.model_calls))
    batched = _batch_run(h, workload, say)
    memory_gb = h.functions["worker"].memory_mb / 1024
    table = read_price_table()
    return {
        "method": (
            "the reference workload through submit, relay and worker (moto, the local model server) at the "
            "standard tier, then again at the batch tier through submit, relay, worker, batcher, the local "
            "Batch API, batch poller and worker until every job Succeeded; tokens from the jobs' usage; "
            "dollars per 1,000 jobs of the workload's mix from docs/model-prices.json for every model/tier "
            "pair it offers (standard and flex rows: the standard run's tokens; batch rows: the batch "
            "run's); the standard and flex model wait from the measured calls per job x the assumed "
            f"seconds per call, at the worker's memory, shared by a batch of {WAIT_SHARING}; the batch "
            "rows' Lambda time the measured handler time of the batch run's worker invocations per job, "
            "at the worker's memory; priced at Lambda's arm64 GB-second"
        ),
        "workload": [batch.__dict__ for batch in workload],
        "jobs": measured.jobs,
        "perJob": _per_job(measured),
        "cachedShare": _cached_share(measured),
        "usageTiers": measured.tiers,
        "callSecondsAssumed": {tier.value: seconds for tier, seconds in CALL_SECONDS.items()},
        "workerMemoryGb": memory_gb,
        "tiers": _priced(table, prices, measured, batched, memory_gb),
        "batch": _batch_section(h, table, measured, batched),
    }


def _runs(workload: tuple[Batch, ...], letter: str) -> Iterator[tuple[Batch, int, str]]:
    """Each group's runs and its text; `letter` tells one run's documents from the other's."""
    for batch in workload:
        if batch.jobs > MAX_JOBS_PER_GROUP:
            raise ValueError(f"at most {MAX_JOBS_PER_GROUP} jobs a group: one digit names each document")
        text = distinct_document(batch.document_bytes, letter)
        for run_number in range(1, batch.runs + 1):
            yield batch, run_number, text


def distinct_document(size: int, letter: str) -> str:
    """long_document(size) whose every line names its document: "Section " becomes "Sec S3: " (the
    run's `letter`, the job's `{index}`, filled in at submit, the same 8 bytes for an index below
    10). No two documents then share a prompt prefix, so a long document's map steps are cached only
    when the same document is summarized again, and both runs' documents keep long_document's size
    (and token count)."""
    if len(letter) != 1:
        raise ValueError("one letter, so that both runs' documents are the same size")
    marked = long_document(size).replace("Section ", f"Sec {letter}{{index}}: ")
    return f"Document {letter}{{index}}. " + marked


def _batch_run(h: Harness, workload: tuple[Batch, ...], say: Callable[[str], None]) -> BatchMeasured:
    """The workload at the batch tier, end to end; warm batcher and poller containers first (cold
    starts are the cost section's, at its stated share)."""
    h.invoke(FunctionName.BATCHER.value, {"Records": []})
    h.poll_batches()
    batched = BatchMeasured()
    for batch, run_number, text in _runs(workload, "B"):
        say(f"tokens: {batch.jobs} x {batch.name}, batch run {run_number} of {batch.runs}")
        pass_name = f"{BATCH_PASS}{batch.name}-{run_number}"
        batched.add_lifecycle(run_batch_lifecycle(h, pass_name, batch.jobs, text))
        batched.time(h.invocations, pass_name)
    return batched


def _per_job(measured: Measured) -> dict[str, float]:
    return {
        "inputTokens": round(measured.input_tokens / measured.jobs, 1),
        "cachedInputTokens": round(measured.cached_input_tokens / measured.jobs, 1),
        "outputTokens": round(measured.output_tokens / measured.jobs, 1),
        "modelCalls": round(measured.model_calls / measured.jobs, 2),
    }


def _cached_share(measured: Measured) -> float:
    return round(measured.cached_input_tokens / measured.input_tokens, 4) if measured.input_tokens else 0


def _wait_gb_seconds(measured: Measured, memory_gb: float, tier: Tier, calls: int | None = None) -> float:
    """The assumed model wait of a job of the run: the calls a worker waited on (all of the standard
    run's; `calls` for the batch run) x the assumed seconds per call at `tier`, shared by a batch."""
    waited = measured.model_calls if calls is None else calls
    return memory_gb * waited / measured.jobs * CALL_SECONDS[tier] / WAIT_SHARING


def _priced(
    table: ModelPriceTable,
    prices: PriceTable,
    measured: Measured,
    batched: BatchMeasured,
    memory_gb: float,
) -> list[dict[str, Any]]:
    rows = []
    batch_gb_seconds = batched.gb_seconds(FunctionName.WORKER.value, memory_gb)
    for model, by_tier in table.models.items():
        for tier, price in by_tier.items():
            run = batched if tier is Tier.BATCH else measured
            per_thousand = 1000 / run.jobs
            tokens_usd = price.cost(run.input_tokens, run.cached_input_tokens, run.output_tokens)
            gb_seconds = (
                batch_gb_seconds if tier is Tier.BATCH else _wait_gb_seconds(measured, memory_gb, tier)
            )
            rows.append(
                {
                    "model": model,
                    "tier": tier.value,
                    "tokensFrom": "batch run" if tier is Tier.BATCH else "standard run",
                    "waitFrom": "measured worker time" if tier is Tier.BATCH else "assumed",
                    "tokenUsdPer1000Jobs": round(tokens_usd * per_thousand, 4),
                    "tokenUsdPer1000JobsWithoutCache": round(
                        price.cost(run.input_tokens, 0, run.output_tokens) * per_thousand, 4
                    ),
                    "waitGbSecondsPerJob": round(gb_seconds, 3),
                    "waitUsdPer1000Jobs": round(prices.cost("lambdaArmGbSecond", gb_seconds) * 1000, 4),
                }
            )
    return rows


def _batch_section(
    h: Harness, table: ModelPriceTable, measured: Measured, batched: BatchMeasured
) -> dict[str, Any]:
    """What the batch run measured, beside the standard run, and the issue's two aims."""
    model = h.functions["submit"].environment["DEFAULT_MODEL"]  # the model the jobs ran on
    standard_price, batch_price = table.price(model, Tier.STANDARD), table.price(model, Tier.BATCH)
    if standard_price is None or batch_price is None:
        raise RuntimeError(f"docs/model-prices.json offers {model} at standard or batch no more")
    standard_usd = (
        standard_price.cost(measured.input_tokens, measured.cached_input_tokens, measured.output_tokens)
        / measured.jobs
    )
    batch_usd = (
        batch_price.cost(batched.input_tokens, batched.cached_input_tokens, batched.output_tokens)
        / batched.jobs
    )
    memory = {name: h.functions[name].memory_mb / 1024 for name in batched.handlers}
    handlers = {
        name: {
            "invocations": spent.invocations,
            "secondsPerJob": round(spent.seconds / batched.jobs, 4),
            "memoryGb": memory[name],
            "gbSecondsPerJob": round(batched.gb_seconds(name, memory[name]), 4),
        }
        for name, spent in sorted(batched.handlers.items())
    }
    worker_gb = batched.gb_seconds(FunctionName.WORKER.value, memory[FunctionName.WORKER.value])
    all_gb = sum(batched.gb_seconds(name, memory[name]) for name in batched.handlers)
    standard_wait = _wait_gb_seconds(measured, memory[FunctionName.WORKER.value], Tier.STANDARD)
    standard_worker = handler_seconds(h.invocations, FunctionName.WORKER.value, STANDARD_PASS) / measured.jobs
    # Priced as standard's is (a batch call keeps no worker waiting, so any call here is a fallback's).
    batch_wait = _wait_gb_seconds(
        batched, memory[FunctionName.WORKER.value], Tier.STANDARD, calls=batched.worker_calls
    )
    return {
        "model": model,
        "batchSecondsLocal": h.batch_seconds,
        "jobs": batched.jobs,
        "perJob": _per_job(batched),
        "cachedShare": _cached_share(batched),
        "usageTiers": batched.tiers,
        "rounds": batched.rounds,
        "waitingForSeen": batched.waiting_seen,
        "tokenUsdPer1000Jobs": round(batch_usd * 1000, 4),
        "standardTokenUsdPer1000Jobs": round(standard_usd * 1000, 4),
        "handlers": handlers,
        "gbSecondsPerJobAll": round(all_gb, 4),
        "standardWaitGbSecondsPerJob": round(standard_wait, 4),
        "workerModelCalls": batched.worker_calls,
        "waitCallSeconds": CALL_SECONDS[Tier.STANDARD],
        "modelWaitGbSecondsPerJob": round(batch_wait, 4),
        "standardWorkerGbSecondsPerJob": round(standard_worker * memory[FunctionName.WORKER.value], 4),
        "aims": compare(
            batch_token_usd=batch_usd,
            standard_token_usd=standard_usd,
            batch_wait_gb_seconds=batch_wait,
            batch_worker_gb_seconds=worker_gb,
            batch_all_gb_seconds=all_gb,
            standard_wait_gb_seconds=standard_wait,
        ),
    }
