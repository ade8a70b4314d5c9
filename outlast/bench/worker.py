"""Worker concurrency: one invocation with a full batch of slow model calls vs one with a single call.

Each job's input carries `[[delay:N]]`, so the local model server holds each call N seconds.
A worker that overlaps the batch's calls takes about as long for ten jobs as for one (ratio
1.0); one that runs them in turn takes ten times as long (ratio 10.0). Lambda bills the
invocation's wall-clock, so this ratio is the price of every second of model wait (see the
cost section). Single and batch invocations alternate, and the ratio is of their medians.

Locally the batch's storage calls queue on moto's one lock, so the ten claims (and the ten
terminal writes) run one after another and the model calls start staggered; the report gives
that stagger, which DynamoDB, serving the calls in parallel, would not add.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from outlast.bench.cost import run_lifecycle
from outlast.bench.harness import Harness, Invocation, max_overlap
from outlast.bench.stats import summary

TEXT = "Worker benchmark job {index}. The model takes its time. [[delay:{delay}]]"


@dataclass(frozen=True)
class _Run:
    invocation: Invocation
    overlap: int  # most model calls in flight at once
    start_spread: float  # seconds from the first model call's start to the last one's
    before_first_call: float  # seconds from the invocation's start to the first model call


def _one(h: Harness, pass_name: str, size: int, delay: float) -> _Run:
    text = TEXT.replace("{delay}", f"{delay:g}")
    lifecycle = run_lifecycle(h, pass_name, size, text=text)
    invocations = [i for i in h.invocations if i.phase.startswith(f"{pass_name}/worker/")]
    if len(invocations) != 1 or invocations[0].records != size:
        raise RuntimeError(f"{pass_name}: expected one worker invocation of {size} jobs")
    starts = [float(call["started"]) for call in lifecycle.model_calls]
    return _Run(
        invocation=invocations[0],
        overlap=max_overlap(lifecycle.model_calls),
        start_spread=max(starts) - min(starts),
        before_first_call=min(starts) - invocations[0].started,
    )


def run(
    h: Harness,
    *,
    batch: int = 10,
    delay_seconds: float = 2.0,
    repeats: int = 5,
    say: Callable[[str], None] = lambda _line: None,
) -> dict[str, Any]:
    """The worker section of the report."""
    say(f"worker: warming up (delay {delay_seconds:g} s)")
    _one(h, "worker-warmup", 1, delay_seconds)
    single: list[float] = []
    batched: list[float] = []
    overlaps: list[int] = []
    spreads: list[float] = []
    leads: list[float] = []
    pairs: list[float] = []
    for repeat in range(repeats):
        say(f"worker: pair {repeat + 1}/{repeats}")
        order = [1, batch] if repeat % 2 == 0 else [batch, 1]
        times: dict[int, float] = {}
        for size in order:
            measured = _one(h, f"worker{repeat}-{size}", size, delay_seconds)
            times[size] = measured.invocation.duration_seconds
            if size == batch:
                overlaps.append(measured.overlap)
                spreads.append(measured.start_spread)
                leads.append(measured.before_first_call)
        single.append(times[1])
        batched.append(times[batch])
        pairs.append(times[batch] / times[1])
    ratio = statistics.median(batched) / statistics.median(single)
    return {
        "concurrency_ratio": round(ratio, 3),
        "ideal": 1.0,
        "sequential": float(batch),
        "batch": batch,
        "delaySeconds": delay_seconds,
        "singleJobSeconds": summary(single, 3),
        "batchSeconds": summary(batched, 3),
        "pairRatios": summary(pairs, 3),
        "maxModelCallsInFlight": max(overlaps) if overlaps else 0,
        "batchModelCallStartSpreadSeconds": summary(spreads, 3),
        "batchSecondsBeforeFirstModelCall": summary(leads, 3),
        "method": "ratio of the medians of the worker handler's wall time: one invocation with "
        f"{batch} jobs vs one with 1 job, each job's model call held {delay_seconds:g} s by the local "
        "model server; single and batch invocations alternate",
    }
