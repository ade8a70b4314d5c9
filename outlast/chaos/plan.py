"""The fault plan: which fault each job of a chaos run gets, seeded and reproducible.

Every job gets exactly one fault kind (or none), so the model calls and the outcome of a job
can be put down to its fault. The seed decides the kinds' order, the operations and the texts;
the run id only makes keys, users and texts unique, so the same seed can run twice on one stack.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from dataclasses import dataclass
from enum import StrEnum

from outlast.api.http import JsonObject
from outlast.chaos.spec import ProcessFault, tag

JOBS_PER_OWNER = 10  # keeps every owner far below the default 60 submits per minute
FAULT_SHARE = 0.05  # each fault kind's share of the jobs; what is left runs without a fault
CONCURRENT_SUBMITS = 10
POISON_SHARE = 30  # one poison message per this many jobs (at least two)
STREAM_SHARE = 0.5  # of the summarize and analyze jobs, about this share streams its output
# Of the jobs without a fault, about this share runs at the batch tier (DESIGN.md, "Cost tiers"),
# beside the batch faults' own jobs: through the batcher and the poller, among the others' faults.
BATCH_SHARE = 0.25


class Fault(StrEnum):
    """A job's fault kind: the process faults of the shim, and those the driver causes itself."""

    NONE = "none"
    SUBMIT_DEATH_AFTER_CLAIM = ProcessFault.SUBMIT_DEATH_AFTER_CLAIM.value
    SUBMIT_DEATH_AFTER_INPUT = ProcessFault.SUBMIT_DEATH_AFTER_INPUT.value
    RELAY_FAILURE = ProcessFault.RELAY_FAILURE.value
    RELAY_OUTAGE = ProcessFault.RELAY_OUTAGE.value
    WORKER_DEATH_AFTER_CLAIM = ProcessFault.WORKER_DEATH_AFTER_CLAIM.value
    WORKER_DEATH_AFTER_MODEL_CALL = ProcessFault.WORKER_DEATH_AFTER_MODEL_CALL.value
    BATCHER_DEATH_AFTER_CREATE = ProcessFault.BATCHER_DEATH_AFTER_CREATE.value
    POLLER_DEATH_AFTER_ANSWERS = ProcessFault.POLLER_DEATH_AFTER_ANSWERS.value
    DUPLICATE_DELIVERY = "duplicate_delivery"
    PROVIDER_429_STORM = "provider_429_storm"
    PROVIDER_5XX_STORM = "provider_5xx_storm"
    PROVIDER_TIMEOUT = "provider_timeout"
    PROVIDER_CONTENT_POLICY = "provider_content_policy"
    PROVIDER_STREAM_CUT = "provider_stream_cut"
    CANCEL_AFTER_SUBMIT = "cancel_after_submit"
    CANCEL_WHEN_RUNNING = "cancel_when_running"
    CONCURRENT_SUBMITS = "concurrent_identical_submits"
    LONG_INPUT = "long_input"

    @property
    def process_fault(self) -> ProcessFault | None:
        """The shim's fault for this kind, when the shim injects it."""
        try:
            return ProcessFault(self.value)
        except ValueError:
            return None


@dataclass(frozen=True)
class FaultProfile:
    """What a fault kind adds to the text, and what a correct system does with it."""

    directive: str
    extra_calls: float | None  # model calls beyond the baseline a correct system spends; None: varies
    outcomes: frozenset[str]  # the terminal statuses that are correct
    proves: str


_SUCCEEDS = frozenset({"Succeeded"})
PROFILES: dict[Fault, FaultProfile] = {
    Fault.NONE: FaultProfile("", 0, _SUCCEEDS, "the baseline: one model call per job"),
    Fault.SUBMIT_DEATH_AFTER_CLAIM: FaultProfile(
        tag(ProcessFault.SUBMIT_DEATH_AFTER_CLAIM), 0, _SUCCEEDS, "a retry completes a claim-only submit"
    ),
    Fault.SUBMIT_DEATH_AFTER_INPUT: FaultProfile(
        tag(ProcessFault.SUBMIT_DEATH_AFTER_INPUT), 0, _SUCCEEDS, "a retry completes a claim+input submit"
    ),
    Fault.RELAY_FAILURE: FaultProfile(
        tag(ProcessFault.RELAY_FAILURE), 0, _SUCCEEDS, "the stream retries a failed entry of a batch"
    ),
    Fault.RELAY_OUTAGE: FaultProfile(
        tag(ProcessFault.RELAY_OUTAGE), 0, _SUCCEEDS, "the sweeper dispatches what the relay never sent"
    ),
    Fault.WORKER_DEATH_AFTER_CLAIM: FaultProfile(
        tag(ProcessFault.WORKER_DEATH_AFTER_CLAIM), 0, _SUCCEEDS, "an expired lease is swept back to Pending"
    ),
    Fault.WORKER_DEATH_AFTER_MODEL_CALL: FaultProfile(
        tag(ProcessFault.WORKER_DEATH_AFTER_MODEL_CALL), 1, _SUCCEEDS, "an unrecorded answer costs one call"
    ),
    # Batch-tier jobs: the provider's batch answers the one call, however often it is handed over.
    Fault.BATCHER_DEATH_AFTER_CREATE: FaultProfile(
        tag(ProcessFault.BATCHER_DEATH_AFTER_CREATE),
        0,
        _SUCCEEDS,
        "a batch nothing recorded is found by its intent and cancelled; the calls go to another",
    ),
    Fault.POLLER_DEATH_AFTER_ANSWERS: FaultProfile(
        tag(ProcessFault.POLLER_DEATH_AFTER_ANSWERS),
        0,
        _SUCCEEDS,
        "the next poll ends (or hands back) the job once, paying no answer twice",
    ),
    Fault.DUPLICATE_DELIVERY: FaultProfile("", 0, _SUCCEEDS, "a claim is atomic: copies make no calls"),
    Fault.PROVIDER_429_STORM: FaultProfile(
        "[[fault:rate_limit*2]]", 2, _SUCCEEDS, "429s back off and succeed on the third attempt"
    ),
    Fault.PROVIDER_5XX_STORM: FaultProfile(
        "[[fault:server_error*2]]", 2, _SUCCEEDS, "5xx back off and succeed on the third attempt"
    ),
    Fault.PROVIDER_TIMEOUT: FaultProfile(
        "[[fault:timeout*1]]", 1, _SUCCEEDS, "a timed-out call is retried once"
    ),
    Fault.PROVIDER_CONTENT_POLICY: FaultProfile(
        "[[fault:content_policy]]", 0, frozenset({"Failed"}), "a terminal refusal fails at once, no retry"
    ),
    Fault.PROVIDER_STREAM_CUT: FaultProfile(
        "[[fault:stream_cut*1]]", 1, _SUCCEEDS, "a stream cut mid-way is streamed again as a new attempt"
    ),
    Fault.CANCEL_AFTER_SUBMIT: FaultProfile(
        "", None, frozenset({"Canceled", "Succeeded"}), "a cancel racing dispatch and claim"
    ),
    Fault.CANCEL_WHEN_RUNNING: FaultProfile(
        "[[delay:1]]", None, frozenset({"Canceled", "Succeeded"}), "a cancel racing the model's answer"
    ),
    Fault.CONCURRENT_SUBMITS: FaultProfile(
        "", 0, _SUCCEEDS, f"{CONCURRENT_SUBMITS} identical concurrent submits make one job"
    ),
    # Not a fault: a job planned in several steps, run among the others' faults (the background
    # rates of the shim reach it too). Its calls are one per step, so "extra" varies with its plan.
    Fault.LONG_INPUT: FaultProfile(
        "", None, _SUCCEEDS, "a long input runs in checkpointed steps among the faults"
    ),
}
# About this many bytes of text for a long-input job: several chunks of the stack's default plan.
LONG_INPUT_BYTES = 60_000

_WORDS = (
    *("ledger", "invoice", "shipment", "refund", "outage", "latency", "budget", "forecast"),
    *("customer", "contract", "renewal", "warehouse", "backlog", "incident", "release"),
    *("migration", "quota", "audit", "vendor", "pipeline", "churn", "margin"),
)
_LABELS = ("billing", "shipping", "technical", "account")


@dataclass(frozen=True)
class PlannedJob:
    """One job of the run: its fault, its owner and exactly what is submitted."""

    index: int
    fault: Fault
    owner: int
    key: str
    request: JsonObject

    @property
    def text(self) -> str:
        """The input text (unique in the run, so its model calls can be told apart)."""
        return str(self.request["input"]["text"])

    @property
    def stream(self) -> bool:
        """True when the job streams its output (options.stream)."""
        options = self.request.get("options")
        return bool(options and options.get("stream"))

    @property
    def batch(self) -> bool:
        """True when the job runs at the batch tier (options.tier)."""
        options = self.request.get("options")
        return bool(options and options.get("tier") == "batch")

    @property
    def labels(self) -> tuple[str, ...] | None:
        """The classify labels, if any."""
        options = self.request.get("options")
        labels = options.get("labels") if options else None
        return tuple(labels) if labels else None


@dataclass(frozen=True)
class Poison:
    """A message no worker can use, and the DLQ reason it must end with."""

    body: str
    reason: str


@dataclass(frozen=True)
class Plan:
    """The whole run: jobs, owners, poison messages."""

    seed: int
    run_id: str
    jobs: list[PlannedJob]
    owners: int
    poison: list[Poison]


def fault_counts(jobs: int, rng: random.Random) -> list[Fault]:
    """Each fault kind gets its share (at least one job while there are jobs); the rest none."""
    kinds = [fault for fault in Fault if fault is not Fault.NONE]
    if jobs < len(kinds):
        return rng.sample(kinds, jobs)
    share = max(1, round(jobs * FAULT_SHARE))
    while share > 1 and share * len(kinds) > jobs:
        share -= 1
    faults = [kind for kind in kinds for _ in range(share)]
    return faults + [Fault.NONE] * (jobs - len(faults))


def _request(fault: Fault, index: int, run_id: str, rng: random.Random) -> JsonObject:
    words = " ".join(rng.choice(_WORDS) for _ in range(12))
    text = (
        f"Chaos run {run_id}, job {index:04d}, fault {fault.value}. "
        f"The {words}. Nothing here needs more than one model call. {PROFILES[fault].directive}"
    ).strip()
    if fault is Fault.LONG_INPUT:
        text = _long_text(f"Chaos run {run_id}, job {index:04d}, a long input.", rng)
    elif fault is Fault.SUBMIT_DEATH_AFTER_INPUT:
        # Long enough to be stored beside the job, not inside it: only then is there a moment
        # between the input's write and the job's for the crash to land in.
        text += " " + " ".join(rng.choice(_WORDS) for _ in range(60))
    operation = rng.choice(("summarize", "analyze", "classify"))
    if fault is Fault.PROVIDER_STREAM_CUT:
        operation = "summarize"  # only a streamed call can be cut mid-way
    options: JsonObject = {"labels": list(_LABELS)} if operation == "classify" else {}
    if fault in _BATCH_FAULTS or (fault is Fault.NONE and rng.random() < BATCH_SHARE):
        options["tier"] = "batch"  # never streamed (400)
    elif operation != "classify" and (fault is Fault.PROVIDER_STREAM_CUT or rng.random() < STREAM_SHARE):
        options["stream"] = True
    if not options:
        return {"operation": operation, "input": {"text": text}}
    return {"operation": operation, "input": {"text": text}, "options": options}


_BATCH_FAULTS = frozenset({Fault.BATCHER_DEATH_AFTER_CREATE, Fault.POLLER_DEATH_AFTER_ANSWERS})


def _long_text(opening: str, rng: random.Random) -> str:
    """Paragraphs of seeded words, about LONG_INPUT_BYTES in all, the job's unique opening first."""
    paragraphs = [opening]
    size = len(opening)
    while size < LONG_INPUT_BYTES:
        sentences = [
            f"The {' '.join(rng.choice(_WORDS) for _ in range(10))} moved as planned." for _ in range(8)
        ]
        paragraph = " ".join(sentences)
        paragraphs.append(paragraph)
        size += len(paragraph) + 2
    return "\n\n".join(paragraphs)


def _poison(count: int, rng: random.Random, run_id: str) -> list[Poison]:
    """Half of them not job messages at all, half naming a job that does not exist; all distinct."""
    poison = []
    for index in range(count):
        trace = f"chaos-{run_id}-poison-{index}"
        if index % 2 == 1:
            unknown = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            poison.append(Poison(json.dumps({"jobId": unknown, "traceId": trace}), "unknown_job"))
            continue
        bodies = (
            f"{trace}: not json at all",
            json.dumps({"jobId": index, "traceId": trace}),
            json.dumps({"jobId": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "extra": trace}),
            json.dumps([trace]),
        )
        poison.append(Poison(bodies[(index // 2) % len(bodies)], "unparseable"))
    return poison


def make_plan(jobs: int, seed: int, run_id: str) -> Plan:
    """The run's plan: the same seed and job count give the same faults, operations and texts."""
    rng = random.Random(seed)  # noqa: S311 - reproducible chaos, not security
    faults = fault_counts(jobs, rng)
    rng.shuffle(faults)
    owners = max(2, math.ceil(jobs / JOBS_PER_OWNER))
    planned = [
        PlannedJob(
            index=index,
            fault=fault,
            owner=index % owners,
            key=f"chaos-{run_id}-{index:04d}",
            request=_request(fault, index, run_id, rng),
        )
        for index, fault in enumerate(faults)
    ]
    return Plan(
        seed=seed,
        run_id=run_id,
        jobs=planned,
        owners=owners,
        poison=_poison(max(2, jobs // POISON_SHARE), rng, run_id),
    )
