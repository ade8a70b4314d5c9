"""The token bill's batch run (DESIGN.md, "Cost tiers"; issue 28): the reference workload at the
batch tier, measured end to end through the real handlers.

Each job is submitted with `options.tier: "batch"`; the worker hands its ready calls to the
batcher's queue and ends its claim; the batcher creates one provider batch per model on the local
model server's Batch API (`/v1/files`, `/v1/batches`), which completes it `Harness.batch_seconds`
after its creation; the batch poller (one scheduled run) writes each answer once: a one-step job's
ends the job there (the usual terminal write under the hold), a step's is its checkpoint and the job
goes back to the worker, which sends its next steps (a long document's reduce) to the next batch
or ends it with its final output. Rounds repeat until every job is Succeeded.

What it measures: the jobs' tokens (their status documents' usage, which names the tiers the calls
ran at), and the handler time of the invocations of the worker, the batcher and the poller in the
run: a batch job's Lambda bill instead of a model wait. The verdicts compare them with the standard
run's (`compare`, pure: tests/unit/test_bench_tokens_batch.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from infra.names import FunctionName
from outlast.bench.harness import Harness, Invocation

BATCH_OPTIONS = {"tier": "batch"}
# The aims, as fractions of the standard run's figure.
TOKEN_USD_AIM = 0.5
WAIT_GB_SECONDS_AIM = 0.05
# Rounds of worker -> batcher -> poller before the run gives up (a long document takes two: its map
# steps, then its reduce; the last round's hand-back is ended by the worker's next claim).
MAX_ROUNDS = 6
POLL_GIVE_UP_SECONDS = 60.0  # a batch the local Batch API has not ended by then: the run failed
MEASURED_FUNCTIONS = (FunctionName.WORKER.value, FunctionName.BATCHER.value, FunctionName.BATCH_POLLER.value)


@dataclass
class BatchLifecycle:
    """One group of batch-tier jobs taken from submit to Succeeded."""

    pass_name: str
    job_ids: list[str]
    documents: list[dict[str, Any]]  # the jobs' status documents at the end
    model_calls: int  # lines the local Batch API ran (its call log counts each as a call)
    worker_calls: int  # calls in flight while a worker invocation of the run was (a model wait)
    rounds: int
    waiting_seen: int  # status reads that found a job waiting on a provider batch


def run_batch_lifecycle(h: Harness, pass_name: str, size: int, text: str) -> BatchLifecycle:
    """Submit `size` batch-tier jobs, then worker, batcher and poller in rounds until all succeed."""
    h.pass_name = pass_name
    sub = f"bench-{pass_name}-{uuid.uuid4().hex[:8]}"
    try:
        jobs = [h.submit(text.replace("{index}", str(i)), sub, BATCH_OPTIONS) for i in range(size)]
        h.relay()
        h.reset_model_calls()
        rounds, waiting_seen = 0, 0
        while True:
            _drain(h.work)
            documents = [h.status(job, sub) for job in jobs]
            waiting_seen += sum(d.get("waitingFor") == "provider_batch" for d in documents)
            if all(d["status"] in ("Succeeded", "Failed", "Canceled") for d in documents):
                break
            if rounds == MAX_ROUNDS:
                raise RuntimeError(f"{pass_name}: jobs unfinished after {rounds} rounds")
            rounds += 1
            _drain(h.batch)
            _see_batches_through(h)
        log = h.model_calls()
    finally:
        h.pass_name = None
    unfinished = [d["status"] for d in documents if d["status"] != "Succeeded"]
    if unfinished:
        raise RuntimeError(f"{pass_name}: jobs did not succeed: {unfinished}")
    worker_calls = calls_during(log, h.invocations, FunctionName.WORKER.value, f"{pass_name}/")
    return BatchLifecycle(pass_name, jobs, documents, len(log), worker_calls, rounds, waiting_seen)


def calls_during(
    log: list[dict[str, Any]], invocations: Iterable[Invocation], function: str, pass_prefix: str
) -> int:
    """The model calls in flight during one of the function's invocations in the passes: calls its
    handler waited on. The harness runs one function at a time, so a batch's lines, which the local
    Batch API runs inside the poller's retrieve, are never in a worker's window."""
    windows = [
        (invocation.started, invocation.finished)
        for invocation in invocations
        if invocation.function == function and invocation.phase.startswith(pass_prefix)
    ]
    return sum(
        any(
            float(call["started"]) < finished and float(call["finished"]) > started
            for started, finished in windows
        )
        for call in log
    )


def _drain(poll: Callable[[], int]) -> None:
    """Poll a queue's mapping until it delivers nothing (each poll is one invocation at most)."""
    while poll():
        pass


def _see_batches_through(h: Harness) -> None:
    """The poller's scheduled runs until every open batch has ended: the first after the local Batch
    API's completion time (in AWS the schedule's rate stands in for that wait), the next ones only
    if a batch was still running."""
    time.sleep(h.batch_seconds)
    deadline = time.monotonic() + POLL_GIVE_UP_SECONDS
    while True:
        invocation = h.poll_batches()
        if invocation.error is not None:
            raise RuntimeError(f"the batch poller failed: {invocation.error}")
        report = invocation.response
        if report["open"] == report["ended"]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"batches still open after {POLL_GIVE_UP_SECONDS:g} s: {report}")
        time.sleep(0.2)


# --- what the run measured -------------------------------------------------------------------


@dataclass
class HandlerTime:
    """Measured handler time of one function over a run."""

    invocations: int = 0
    seconds: float = 0.0


@dataclass
class Measured:
    """A run's tokens and model calls, as the jobs' status documents report them."""

    jobs: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    tiers: dict[str, int] = field(default_factory=dict)  # jobs whose usage names each tier

    def add(self, documents: list[dict[str, Any]], calls: int) -> None:
        for document in documents:
            usage = document["usage"]
            self.jobs += 1
            self.input_tokens += usage["inputTokens"]
            self.cached_input_tokens += usage["cachedInputTokens"]
            self.output_tokens += usage["outputTokens"]
            for tier in usage.get("tiers", []):
                self.tiers[tier] = self.tiers.get(tier, 0) + 1
        self.model_calls += calls


@dataclass
class BatchMeasured(Measured):
    """The batch run's tokens and calls, its rounds, and the handler time of its invocations."""

    rounds: int = 0
    waiting_seen: int = 0
    worker_calls: int = 0  # model calls a worker invocation of the run waited on
    handlers: dict[str, HandlerTime] = field(default_factory=dict)

    def add_lifecycle(self, lifecycle: BatchLifecycle) -> None:
        self.add(lifecycle.documents, lifecycle.model_calls)
        self.worker_calls += lifecycle.worker_calls
        self.rounds = max(self.rounds, lifecycle.rounds)
        self.waiting_seen += lifecycle.waiting_seen

    def time(self, invocations: Iterable[Invocation], pass_name: str) -> None:
        """Add the handler time of the measured functions' invocations in the pass."""
        for invocation in invocations:
            if invocation.phase.startswith(f"{pass_name}/") and invocation.function in MEASURED_FUNCTIONS:
                spent = self.handlers.setdefault(invocation.function, HandlerTime())
                spent.invocations += 1
                spent.seconds += invocation.duration_seconds

    def gb_seconds(self, function: str, memory_gb: float) -> float:
        """The function's measured GB-seconds per job of the run."""
        spent = self.handlers.get(function)
        return spent.seconds / self.jobs * memory_gb if spent and self.jobs else 0.0


def handler_seconds(invocations: Iterable[Invocation], function: str, pass_prefix: str) -> float:
    """Seconds the function's handler ran in the passes whose name starts with `pass_prefix`."""
    return sum(
        invocation.duration_seconds
        for invocation in invocations
        if invocation.function == function and invocation.phase.startswith(pass_prefix)
    )


def verdict(value: float, reference: float, aim: float) -> dict[str, Any]:
    """`value` as a share of `reference` (4 places, as the report shows it) against the aim."""
    ratio = round(value / reference, 4) if reference else float("inf")
    return {"ratio": ratio, "aim": aim, "verdict": "met" if ratio <= aim else "missed"}


def compare(
    *,
    batch_token_usd: float,
    standard_token_usd: float,
    batch_wait_gb_seconds: float,
    batch_worker_gb_seconds: float,
    batch_all_gb_seconds: float,
    standard_wait_gb_seconds: float,
) -> dict[str, Any]:
    """The issue's two aims: token dollars against standard's, and model-wait GB-seconds against
    standard's (both tiers' wait priced the same way: the model calls a worker waited on x the
    assumed seconds per call); then, stricter, the Lambda GB-seconds a batch job costs instead (its
    worker invocations' handler time; and with the batcher's and the poller's) against the same
    standard wait, all per job."""
    return {
        "tokenUsd": verdict(batch_token_usd, standard_token_usd, TOKEN_USD_AIM),
        "modelWaitGbSeconds": verdict(batch_wait_gb_seconds, standard_wait_gb_seconds, WAIT_GB_SECONDS_AIM),
        "waitGbSeconds": verdict(batch_worker_gb_seconds, standard_wait_gb_seconds, WAIT_GB_SECONDS_AIM),
        "waitGbSecondsWithBatcherAndPoller": verdict(
            batch_all_gb_seconds, standard_wait_gb_seconds, WAIT_GB_SECONDS_AIM
        ),
    }
