"""The token bill's part of docs/benchmarks.md (its numbers: outlast.bench.tokens)."""

from __future__ import annotations

from typing import Any

# How the report names a row's sources (outlast.bench.tokens._priced).
_TOKENS_FROM = {"standard run": "standard run's", "batch run": "batch run's"}
_WAIT_FROM = {"assumed": "assumed", "measured worker time": "measured"}
_HANDLER_NAMES = {"worker": "worker", "batcher": "batcher", "batch_poller": "batch poller"}


def markdown_section(section: dict[str, Any], stamp: str) -> str:
    """The section: how it was made (`stamp`), the workload, what a job used, each model/tier pair's
    dollars (and which run each row's figures come from), and the batch run against the standard."""
    per_job = section["perJob"]
    workload = ", ".join(
        f"{batch['jobs']} x {batch['document_bytes'] // 1000} KB"
        + (f" (run {batch['runs']} times)" if batch["runs"] > 1 else "")
        for batch in section["workload"]
    )
    assumed = ", ".join(f"{tier} {seconds:g} s" for tier, seconds in section["callSecondsAssumed"].items())
    batch = section.get("batch")
    lines = [
        "## The token bill\n",
        stamp + "\n",
        f"Reference workload: summaries of {workload}: {section['jobs']} jobs. Per job, at the standard "
        f"tier: {per_job['inputTokens']:,.0f} input tokens ({per_job['cachedInputTokens']:,.0f} of them "
        f"cached), {per_job['outputTokens']:,.0f} output tokens, {per_job['modelCalls']} model calls. "
        f"Share of input tokens cached: {section['cachedShare']:.1%}. Model wait of the standard and flex "
        f"rows assumed per call ({assumed}; not measured) at {section['workerMemoryGb']:g} GB.\n",
        _sources(batch is not None),
        "| model | tier | tokens from | tokens $ / 1,000 jobs | without the cache | Lambda GB-s / job "
        "| wait from | wait $ / 1,000 jobs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {row['model']} | {row['tier']} | {_TOKENS_FROM.get(row.get('tokensFrom', ''), 'standard run')} | "
        f"{row['tokenUsdPer1000Jobs']:.4f} | {row['tokenUsdPer1000JobsWithoutCache']:.4f} | "
        f"{row['waitGbSecondsPerJob']:.3f} | {_WAIT_FROM.get(row.get('waitFrom', ''), 'assumed')} | "
        f"{row['waitUsdPer1000Jobs']:.4f} |"
        for row in section["tiers"]
    ]
    if batch is not None:
        lines.append("\n" + _batch(batch))
    lines.append(f"\nMethod: {section['method']}.\n")
    return "\n".join(lines)


def _sources(with_batch_run: bool) -> str:
    if not with_batch_run:
        return "Every row prices the standard run's tokens.\n"
    return (
        "Which rows are measured: the standard rows are the standard run's tokens (measured) with an "
        "assumed model wait; the flex rows are priced from the standard run's tokens (flex was not run) "
        "with an assumed wait; the batch rows are the batch run's own tokens and its worker's measured "
        "handler time per job (no model wait: the worker hands the calls over and ends its claim). "
        "Models other than the stage's are the same tokens at that model's price.\n"
    )


def _batch(batch: dict[str, Any]) -> str:
    """The batch run: what it measured, and the issue's two aims against the standard run (the wait
    aim read twice: model wait as standard's is priced, then all the Lambda time the batch path takes)."""
    per_job, aims = batch["perJob"], batch["aims"]
    tiers = ", ".join(f"{tier} on {count}" for tier, count in sorted(batch["usageTiers"].items()))
    handlers = "\n".join(
        f"| {_HANDLER_NAMES.get(name, name)} | {spent['invocations']} | {spent['secondsPerJob'] * 1000:.1f} "
        f"ms | {spent['memoryGb']:g} GB | {spent['gbSecondsPerJob']:.4f} |"
        for name, spent in batch["handlers"].items()
    )
    token, wait, all_in = aims["tokenUsd"], aims["waitGbSeconds"], aims["waitGbSecondsWithBatcherAndPoller"]
    worker, standard_wait = batch["handlers"]["worker"], batch["standardWaitGbSecondsPerJob"]
    return "\n".join(
        [
            "### The batch tier, measured\n",
            f'The same workload with `options.tier: "batch"` on {batch["model"]}, end to end: submit, '
            "relay, worker (hands the calls to the batcher's queue and ends its claim), batcher (one "
            "provider batch per model on the local model server's Batch API, which completes a batch "
            f"{batch['batchSecondsLocal']:g} s after its creation), batch poller (writes each answer once: "
            "a one-step job's ends the job with the usual terminal write, a step's is its checkpoint and "
            "the job goes back), worker again for a long document (sends its reduce to the next batch, then "
            f"ends it), in at most {batch['rounds']} rounds, until all {batch['jobs']} jobs "
            f"Succeeded; status reads saw `waitingFor: provider_batch` {batch['waitingForSeen']} times. "
            f"Per job: {per_job['inputTokens']:,.0f} input tokens ({per_job['cachedInputTokens']:,.0f} "
            f"cached, {batch['cachedShare']:.1%}), {per_job['outputTokens']:,.0f} output tokens, "
            f"{per_job['modelCalls']} model calls; the usage names the tiers {tiers} jobs.\n",
            "| function | invocations | handler time / job | memory | GB-s / job |",
            "|---|---|---|---|---|",
            handlers,
            "",
            "| aim (issue 28) | batch run | standard | ratio | aim | verdict |",
            "|---|---|---|---|---|---|",
            f"| token $ / 1,000 jobs ({batch['model']}) | {batch['tokenUsdPer1000Jobs']:.4f} | "
            f"{batch['standardTokenUsdPer1000Jobs']:.4f} | {token['ratio']:.1%} | "
            f"<= {token['aim']:.0%} | {token['verdict']} |",
            *_model_wait_row(batch),
            f"| stricter: Lambda GB-s / job a batch job costs instead (worker handler time) | "
            f"{worker['gbSecondsPerJob']:.4f} | {standard_wait:.4f} | "
            f"{wait['ratio']:.1%} | <= {wait['aim']:.0%} | {wait['verdict']} |",
            f"| the same, with the batcher and the poller | {batch['gbSecondsPerJobAll']:.4f} | "
            f"{standard_wait:.4f} | {all_in['ratio']:.1%} | <= {all_in['aim']:.0%} | "
            f"{all_in['verdict']} |",
            "",
            "Measured: the batch run's tokens, dollars (its tokens at the batch price) and handler times. "
            "The model-wait row prices both tiers' wait alike: the model calls a worker invocation had in "
            "flight (the batch run's found from the model server's call log against the invocations' "
            "windows; a batch's lines run at the provider, so only a fallback call would count) x the "
            "assumed seconds per call, shared by the worker's batch. The stricter rows after it hold "
            "all the Lambda time the batch path takes (claims, hand-offs, writes) to that same wait. "
            "The standard column's tokens are the standard run's (measured); its model wait is priced, "
            "not measured: the standard run's calls per job x the assumed seconds per call, shared by "
            "the worker's batch, as in the table above. Handler time is each invocation's wall time in "
            "one process against moto (warm containers: cold starts are the cost section's); the "
            "poller's runs are those that saw this run's batches (in AWS its schedule runs whether or not "
            "a batch is open, a fixed cost per month), and include the local Batch API running the "
            "batch's lines inside the retrieve that ends it (the model server is a thread of the same "
            "process; the provider's retrieve answers at once). The standard run's worker, measured the "
            "same way, "
            f"spent {batch['standardWorkerGbSecondsPerJob']:.4f} GB-s a job beside its model wait.",
        ]
    )


def _model_wait_row(batch: dict[str, Any]) -> list[str]:
    """The model-wait aim, both tiers priced alike: calls a worker waited on x the assumed seconds
    per call (a report of a run before this row was measured has none)."""
    wait = batch["aims"].get("modelWaitGbSeconds")
    if wait is None:
        return []
    return [
        f"| model-wait GB-s / job (calls a worker waited on: {batch['workerModelCalls']} in the batch run, "
        f"x the assumed {batch['waitCallSeconds']:g} s) | {batch['modelWaitGbSecondsPerJob']:.4f} | "
        f"{batch['standardWaitGbSecondsPerJob']:.4f} | {wait['ratio']:.1%} | <= {wait['aim']:.0%} | "
        f"{wait['verdict']} |"
    ]
