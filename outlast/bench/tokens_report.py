"""The token bill's part of docs/benchmarks.md (its numbers: outlast.bench.tokens)."""

from __future__ import annotations

from typing import Any


def markdown_section(section: dict[str, Any], stamp: str) -> str:
    """The section: how it was made (`stamp`), the workload, what a job used, and each model/tier
    pair's dollars."""
    per_job = section["perJob"]
    workload = ", ".join(
        f"{batch['jobs']} x {batch['document_bytes'] // 1000} KB"
        + (f" (run {batch['runs']} times)" if batch["runs"] > 1 else "")
        for batch in section["workload"]
    )
    assumed = ", ".join(f"{tier} {seconds:g} s" for tier, seconds in section["callSecondsAssumed"].items())
    lines = [
        "## The token bill\n",
        stamp + "\n",
        f"Reference workload: summaries of {workload}: {section['jobs']} jobs. Per job: "
        f"{per_job['inputTokens']:,.0f} input tokens ({per_job['cachedInputTokens']:,.0f} of them cached), "
        f"{per_job['outputTokens']:,.0f} output tokens, {per_job['modelCalls']} model calls. Share of input "
        f"tokens cached: {section['cachedShare']:.1%}. Model wait assumed per call ({assumed}; not "
        f"measured) at {section['workerMemoryGb']:g} GB.\n",
        "| model | tier | tokens $ / 1,000 jobs | without the cache | wait GB-s / job "
        "| wait $ / 1,000 jobs |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {row['model']} | {row['tier']} | {row['tokenUsdPer1000Jobs']:.4f} | "
        f"{row['tokenUsdPer1000JobsWithoutCache']:.4f} | {row['waitGbSecondsPerJob']:.3f} | "
        f"{row['waitUsdPer1000Jobs']:.4f} |"
        for row in section["tiers"]
    ]
    lines.append(f"\nMethod: {section['method']}.\n")
    return "\n".join(lines)
