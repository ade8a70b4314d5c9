"""Streaming: time to first output, and the write units of the events (DESIGN.md, "Streaming output").

The whole local stack over HTTP and a real WebSocket (as the pipeline section runs it), with the
zero-delay local model, so the model's first token is immediate. One client submits a streaming
job, follows it on its WebSocket at once, and notes when the first `output` message arrives,
then submits the next when the job has ended (a closed loop, one job at a time). Reported:

- time to first output from the submit (the job's `createdAt`) and from the claim, p50/p95, beside
  submit -> terminal. The claim's instant is the job's `updatedAt` while it runs (nothing but the
  terminal write moves it after the claim: the attempt's heartbeat and later heartbeats leave it),
  read with a GET as soon as the first output message is in; the answer is paced (`[[pace:30]]`,
  the first token still immediate) so the job is still running then. All are wall-clock instants
  of this machine, so the clock is the same one. From the submit it
  includes the worker queue's 2 s batching window, which dominates it (DESIGN.md, "Cost and
  latency"); from the claim it is the worker's own path: the attempt's heartbeat write, the
  streamed call's first piece, its event's put, the events stream's poll and the pusher's post.
- the write units of the events per 1,000 output tokens: every event of each job, read back, sized
  by DynamoDB's billing rules (shared.adapters.item_size), each rounded up to whole units, over the
  output tokens the job's usage reports. One flush is one unit when no event passes 1 KB.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from outlast.api.http import HttpApi
from outlast.bench.pipeline import start_stack
from outlast.bench.stats import latency_summary, percentile
from outlast.live import LiveUpdates, OutputPush, Update, open_live
from outlast.local.access import issue_token
from outlast.local.iam.enforcement import denial_count
from shared.adapters.dynamodb_output import event_item
from shared.adapters.item_size import item_size
from shared.output import OutputEvent

WRITE_UNIT_BYTES = 1024
TERMINAL = frozenset({"Succeeded", "Failed", "Canceled"})
JOB_TIMEOUT_SECONDS = 120.0
# A document whose summary has 60 words (the local model's longest): several events per job.
TEXT = " ".join(
    f"Sentence {n} of the streaming benchmark names the ledger and its totals." for n in range(12)
)
# Paced after the first token, which comes at once: the job is still running when its claim is read.
PACE = "[[pace:30]]"


@dataclass
class Sample:
    """One job as its follower saw it."""

    job_id: str
    created_at: datetime
    claimed_at: datetime | None
    first_output_at: datetime | None
    ended_at: datetime
    messages: int
    status: str


def _iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _follow_one(api: HttpApi, live: LiveUpdates) -> Sample:
    body = {
        "operation": "summarize",
        "input": {"text": f"{TEXT} {uuid.uuid4()} {PACE}"},
        "options": {"stream": True},
    }
    document = api.submit(body, f"bench-stream-{uuid.uuid4()}").document
    job_id = document.job_id
    live.follow(job_id)
    claimed_at: datetime | None = None
    first_output_at: datetime | None = None
    messages = 0
    deadline = time.monotonic() + JOB_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        pushed = live.next_message(1.0)
        if isinstance(pushed, OutputPush) and pushed.job_id == job_id:
            messages += 1
            if first_output_at is None:
                first_output_at = datetime.now(UTC)
                running = api.get_job(job_id).document
                if running.status == "Running":
                    claimed_at = running.updated_at
        elif isinstance(pushed, Update) and pushed.document.job_id == job_id:
            if pushed.document.status == "Running" and claimed_at is None:
                claimed_at = pushed.document.updated_at
            if pushed.document.status in TERMINAL:
                live.unfollow(job_id)
                return Sample(
                    job_id=job_id,
                    created_at=document.created_at,
                    claimed_at=claimed_at,
                    first_output_at=first_output_at,
                    ended_at=pushed.document.updated_at,
                    messages=messages,
                    status=pushed.document.status,
                )
    raise TimeoutError(f"job {job_id} did not end in {JOB_TIMEOUT_SECONDS:.0f} s")


def _write_units(api: HttpApi, job_ids: list[str]) -> dict[str, Any]:
    """Events read back, each sized as DynamoDB bills it, against the output tokens of their jobs."""
    events = units = largest = tokens = 0
    for job_id in job_ids:
        after = "0.0"
        while True:
            page = api.get_output(job_id, after=after).document
            for event in page.events:
                item = event_item(
                    OutputEvent(job_id=job_id, attempt=event.attempt, seq=event.seq, text=event.text),
                    datetime.now(UTC) + timedelta(hours=24),
                )
                size = item_size(item)
                events, largest = events + 1, max(largest, size)
                units += math.ceil(size / WRITE_UNIT_BYTES)
            if page.complete or not page.events:
                break
            after = str(page.next_cursor)
        usage = api.get_job(job_id).document.usage
        tokens += usage.output_tokens if usage is not None else 0
    return {
        "jobs": len(job_ids),
        "events": events,
        "writeUnits": units,
        "largestEventBytes": largest,
        "outputTokens": tokens,
        "writeUnitsPer1000OutputTokens": round(units * 1000 / tokens, 2) if tokens else None,
        "writeUnitsPerEvent": round(units / events, 3) if events else None,
    }


def _seconds(pairs: list[tuple[datetime | None, datetime | None]]) -> list[float]:
    return [(later - earlier).total_seconds() for earlier, later in pairs if earlier and later]


def _summary(samples: list[float]) -> dict[str, Any]:
    summary = latency_summary(samples)
    if samples:
        summary["p95"] = round(percentile(samples, 0.95), 4)
    return summary


def run(*, jobs: int, say: Callable[[str], None]) -> dict[str, Any]:
    """Stream `jobs` jobs one after the other through a fresh local stack, following each."""
    stack = start_stack(say)
    try:
        token = issue_token(stack.state, f"bench-stream-{uuid.uuid4().hex[:8]}", None)
        api = HttpApi(f"http://127.0.0.1:{stack.port}", token, 60)
        samples: list[Sample] = []
        with open_live(api) as live:
            say(f"streaming: {jobs} jobs, one at a time, each followed from its submit")
            _follow_one(api, live)  # warm-up: the functions' first invocations are cold
            for _ in range(jobs):
                samples.append(_follow_one(api, live))
        job_ids = [sample.job_id for sample in samples if sample.status == "Succeeded"]
        result = {
            "jobs": jobs,
            "succeeded": sum(sample.status == "Succeeded" for sample in samples),
            # Output messages that arrived before the job's end was pushed (its last may come after).
            "messagesPerJob": round(sum(s.messages for s in samples) / len(samples), 2) if samples else None,
            "firstOutputFromSubmitSeconds": _summary(
                _seconds([(s.created_at, s.first_output_at) for s in samples])
            ),
            "firstOutputFromClaimSeconds": _summary(
                _seconds([(s.claimed_at, s.first_output_at) for s in samples])
            ),
            "terminalFromSubmitSeconds": _summary(_seconds([(s.created_at, s.ended_at) for s in samples])),
            "eventWrites": _write_units(api, job_ids),
            "iamDenials": denial_count(stack.state),
        }
        say("streaming: " + json.dumps(result["firstOutputFromClaimSeconds"]))
        return result
    finally:
        stack.stop()
