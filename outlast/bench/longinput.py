"""A 1 MiB summarize: what one long input costs in steps, model calls, write units and dollars.

Two passes through the functions' real handlers against moto and the local model server:

- accounting: the document as it is (the model answers at once): the job's steps (its
  `progress.totalSteps`), its model calls, the DynamoDB write and read units (checkpoints,
  progress writes, the job's transitions) and the dollars per job without tokens, priced like
  the cost section's small job (the worker's billed time is measured here, its model wait 0);
- timing: the same document with `[[delay:D]]` in every paragraph, so every step's call takes D
  seconds: the worker's wall time against the steps x D a one-call-at-a-time worker would take,
  which shows the step concurrency (`stepConcurrency` calls in flight, a reduce level waiting for
  the level below it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from outlast.bench.cost import account, price_lines, run_lifecycle
from outlast.bench.harness import Harness
from outlast.bench.prices import PriceTable
from outlast.documents import long_document
from shared.contract import MAX_INPUT_TEXT_BYTES


def run(
    h: Harness,
    prices: PriceTable,
    *,
    max_bytes: int = MAX_INPUT_TEXT_BYTES,
    delay_seconds: float = 1.0,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Both passes; the section of the report."""
    say(f"long input: accounting pass ({max_bytes} bytes)")
    text = long_document(max_bytes)
    h.meter.images, h.logs.keep = True, True  # units from the item images, as the cost section counts
    try:
        accounting = run_lifecycle(h, "long-accounting", 1, text=text)
        quantities, details = account(h, accounting)
    finally:
        h.meter.images, h.logs.keep = False, False
    worker_runs = [i for i in h.invocations if i.phase.startswith("long-accounting/worker")]
    quantities.billed_ms = {
        name: float(math.ceil(statistics.median(i.duration_seconds * 1000 for i in group)))
        for name, group in _by_function(h, "long-accounting/").items()
    }
    lines = price_lines(quantities, prices)
    steps = accounting.documents[0]["progress"]["totalSteps"]
    say(f"long input: timing pass ([[delay:{delay_seconds:g}]] in every step's call)")
    timed_text = long_document(max_bytes, delay_seconds=delay_seconds)
    timing = run_lifecycle(h, "long-timing", 1, text=timed_text)
    wall = sum(i.duration_seconds for i in h.invocations if i.phase.startswith("long-timing/worker"))
    # One call at a time, the worker would wait for every call in turn (a reduce holds no
    # directive: the map answers never echo one, so only map calls are slow).
    sequential = sum(float(c["finished"]) - float(c["started"]) for c in timing.model_calls)
    return {
        "method": (
            "one 1 MiB summarize through submit, relay and worker (moto, the local model server), stage "
            "defaults (chunkTokens 6000, stepOutputTokens 800, stepConcurrency 4); write and read units "
            "from ReturnConsumedCapacity as the cost section counts them; dollars from the same price "
            "table, without model tokens; wall time of the worker's invocations with every call delayed"
        ),
        "inputBytes": len(text.encode("utf-8")),
        "steps": steps,
        "modelCalls": len(accounting.model_calls),
        "writeUnits": {
            "tables": round(quantities.write_units_table, 1),
            "indexes": round(quantities.write_units_index, 1),
        },
        "readUnits": round(quantities.read_units, 1),
        "workerInvocations": len(worker_runs),
        "usdPerJob": round(sum(line.usd_per_million for line in lines) / 1e6, 6),
        "lines": [line.as_json() for line in lines],
        "dynamodb": details["dynamodb"],
        "timing": {
            "delaySecondsPerCall": delay_seconds,
            "modelCalls": len(timing.model_calls),
            "workerWallSeconds": round(wall, 1),
            "oneCallAtATimeSeconds": round(sequential, 1),  # the calls' own durations, summed
            "speedup": round(sequential / wall, 2) if wall else None,
        },
    }


def _by_function(h: Harness, prefix: str) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for invocation in h.invocations:
        if invocation.phase.startswith(prefix):
            grouped.setdefault(invocation.function, []).append(invocation)
    return grouped
