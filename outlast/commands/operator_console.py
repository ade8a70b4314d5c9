"""What the redrive commands say while they work: human lines on stdout, or (with --json) one
document on stdout and the lines on stderr, and the plan in the same words for messages and jobs."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from enum import Enum
from typing import Protocol


class PlannedStep(Protocol):
    """A step of a redrive plan: a message of a DLQ, or a Failed job."""

    @property
    def action(self) -> Enum: ...


class OperatorConsole[StepT: PlannedStep]:
    """The lines of one command run; subclasses say how one step of their plan reads."""

    def __init__(self, as_json: bool) -> None:
        self._json = as_json
        self._stream = sys.stderr if as_json else sys.stdout

    def line(self, text: str = "") -> None:
        print(text, file=self._stream, flush=True)

    def plan(self, steps: Sequence[StepT]) -> None:
        if not steps:
            self.line("nothing to do")
            return
        for step in steps:
            self._describe(step)
        counts = Counter(step.action.value for step in steps)
        self.line(
            "dry run: " + ", ".join(f"{n} {a}" for a, n in sorted(counts.items())) + ". "
            "Without --dry-run, a run does exactly this (each write re-checks its job first)."
        )

    def _describe(self, step: StepT) -> None:
        raise NotImplementedError
