"""What the redrive commands say while they work, through the one console (human lines on stdout,
or with --json the document on stdout and the lines on stderr), and the plan in the same words
for messages and jobs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from enum import Enum
from typing import Any, Protocol

from outlast.cli.console import Console


class PlannedStep(Protocol):
    """A step of a redrive plan: a message of a DLQ, or a Failed job."""

    @property
    def action(self) -> Enum: ...


class OperatorConsole[StepT: PlannedStep]:
    """The lines of one command run; subclasses say how one step of their plan reads."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def line(self, text: str = "") -> None:
        """One line of the run's account."""
        self.console.line(text)

    def finish(self, document: dict[str, Any]) -> None:
        """The run's document, with --json."""
        if self.console.json_mode:
            self.console.show(None, document)

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
