"""The chaos spec: which process-level faults local mode injects, and where it records them.

Shared by `outlast local up --chaos SPEC` (which sets local mode's fault hook to the shim, with
the spec in every function process's environment), the shim that injects the faults
(`outlast.chaos.shim`) and the driver that reads back what was injected. Standard library only:
the shim imports it inside every function process.

A fault fires for a job when its input text carries the tag `[[chaos:KIND]]` (the driver's
way: one planned fault per job, deterministic), or, for untagged jobs, when a hash of the seed,
the kind and the job id falls under the kind's rate (a seeded background rate, reproducible
per job id). Deaths fire once per job; `relay_outage` fails every send of the job's message.

The state directory holds three things, all plain files so that every process sees them:
- `jobs/{jobId}`: the tag of a job, written by the submit shim before the job item exists;
- `fired/{kind}.{jobId}`: created exclusively the first time a once-only fault fires;
- `events.jsonl`: one line per injected fault (kind, job, function, pid, batch, time).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

ENV_SPEC = "OUTLAST_CHAOS_SPEC"
DEATH_EXIT_CODE = 137  # what a SIGKILLed process reports: Lambda's "Runtime exited with error"


class ProcessFault(StrEnum):
    """Faults injected inside the function processes (the client-side ones live in the driver)."""

    SUBMIT_DEATH_AFTER_CLAIM = "submit_death_after_claim"
    SUBMIT_DEATH_AFTER_INPUT = "submit_death_after_input"
    RELAY_FAILURE = "relay_failure"
    RELAY_OUTAGE = "relay_outage"
    WORKER_DEATH_AFTER_CLAIM = "worker_death_after_claim"
    WORKER_DEATH_AFTER_MODEL_CALL = "worker_death_after_model_call"
    # Batch-tier jobs (DESIGN.md, "Cost tiers"): the batcher dies once its provider batch exists
    # (nothing recorded it), the poller once a job's answers are written (before its hand-back).
    BATCHER_DEATH_AFTER_CREATE = "batcher_death_after_create"
    POLLER_DEATH_AFTER_ANSWERS = "poller_death_after_answers"

    @property
    def once(self) -> bool:
        """True when the fault fires only the first time for a job (all but the relay outage)."""
        return self is not ProcessFault.RELAY_OUTAGE


_TAG = re.compile(r"\[\[chaos:([a-z_]+)\]\]")


def tag(fault: ProcessFault) -> str:
    """The directive that asks for `fault` in a job's input text."""
    return f"[[chaos:{fault.value}]]"


def tagged_fault(text: str) -> ProcessFault | None:
    """The fault a job's text asks for, if any (unknown kinds are ignored)."""
    found = _TAG.search(text)
    if found is None:
        return None
    with contextlib.suppress(ValueError):
        return ProcessFault(found.group(1))
    return None


def seeded_fraction(seed: int, *parts: str) -> float:
    """A number in [0, 1) fixed by the seed and the parts: the same job gets the same draw."""
    digest = hashlib.sha256("\x1f".join([str(seed), *parts]).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class ChaosSpec:
    """What to inject and where to record it."""

    state_dir: Path
    seed: int = 0
    tags: bool = True
    rates: dict[ProcessFault, float] = field(default_factory=dict)
    budget: int | None = None  # most faults one process injects (None: no limit)

    def to_json(self) -> str:
        """The spec as local mode passes it to function processes."""
        return json.dumps(self.to_dict(), sort_keys=True)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (also what the stack's state file shows)."""
        return {
            "state_dir": str(self.state_dir),
            "seed": self.seed,
            "tags": self.tags,
            "rates": {fault.value: rate for fault, rate in self.rates.items()},
            "budget": self.budget,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any], default_state_dir: Path | None = None) -> ChaosSpec:
        """Parse a spec; unknown fields or fault kinds are errors, so a typo never runs silently."""
        known = {"state_dir", "seed", "tags", "rates", "budget"}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"unknown chaos spec fields: {', '.join(sorted(unknown))}")
        state_dir = raw.get("state_dir") or default_state_dir
        if state_dir is None:
            raise ValueError("the chaos spec needs a state_dir")
        rates = {ProcessFault(kind): float(rate) for kind, rate in dict(raw.get("rates") or {}).items()}
        if any(not 0.0 <= rate <= 1.0 for rate in rates.values()):
            raise ValueError("chaos rates are probabilities between 0 and 1")
        budget = raw.get("budget")
        return cls(
            state_dir=Path(state_dir),
            seed=int(raw.get("seed", 0)),
            tags=bool(raw.get("tags", True)),
            rates=rates,
            budget=None if budget is None else int(budget),
        )

    @classmethod
    def load(cls, value: str, default_state_dir: Path | None = None) -> ChaosSpec:
        """A spec from inline JSON or from the path of a JSON file (ValueError/TypeError when bad)."""
        text = value if value.lstrip().startswith("{") else Path(value).read_text(encoding="utf-8")
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise TypeError("a chaos spec is a JSON object")
        return cls.from_dict(raw, default_state_dir)

    def prepare(self) -> ChaosSpec:
        """Start with an empty state directory: markers of an earlier run would stop faults firing."""
        shutil.rmtree(self.state_dir, ignore_errors=True)
        for sub in ("jobs", "fired"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        return self


class ChaosState:
    """The state directory, as the shim writes it and the driver reads it."""

    def __init__(self, spec: ChaosSpec) -> None:
        self.spec = spec
        self._root = spec.state_dir

    def remember(self, job_id: str, fault: ProcessFault) -> None:
        """Record which fault a job's text asked for (idempotent: a replayed submit writes the same)."""
        path = self._root / "jobs" / job_id
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fault.value, encoding="utf-8")

    def fault_of(self, job_id: str) -> ProcessFault | None:
        """The fault a job was tagged with at submit, if any."""
        try:
            return ProcessFault((self._root / "jobs" / job_id).read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return None

    def first_time(self, fault: ProcessFault, job_id: str) -> bool:
        """True exactly once per (fault, job) across every process (an exclusive create)."""
        path = self._root / "fired" / f"{fault.value}.{job_id}"
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        os.close(descriptor)
        return True

    def record(self, fault: ProcessFault, job_id: str, function: str, batch: list[str]) -> None:
        """Append one event line; a single O_APPEND write, so lines from many processes never mix."""
        line = json.dumps(
            {
                "at": time.time(),
                "kind": fault.value,
                "jobId": job_id,
                "function": function,
                "pid": os.getpid(),
                "batch": batch,
            },
            separators=(",", ":"),
        )
        self._root.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self._root / "events.jsonl", os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o644)
        try:
            os.write(descriptor, (line + "\n").encode())
        finally:
            os.close(descriptor)

    def events(self) -> list[dict[str, Any]]:
        """Every fault injected so far, oldest first."""
        path = self._root / "events.jsonl"
        if not path.exists():
            return []
        events = []
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        return events
