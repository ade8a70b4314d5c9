"""A structured answer checked before it may become a step's output or a job's result.

The provider's strict mode should only ever produce JSON that matches the schema, but an answer
cut by its token limit is not JSON at all, and a provider (or a model) that slips must never
turn into a Succeeded job holding the wrong shape. The worker parses every answer and validates
it through the SchemaValidator port; one invalid answer is asked again within the same claim,
a second fails the job `invalid_output`; a cut answer fails `output_truncated`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol


class SchemaValidator(Protocol):
    """Checks a JSON value against a JSON Schema (the worker's adapter wraps a validator library)."""

    def first_problem(self, value: Any, schema: dict[str, Any]) -> str | None:
        """The JSON pointer of the first place `value` breaks `schema`, or None when it matches."""
        ...


class AnswerVerdict(StrEnum):
    """What a structured answer is worth."""

    VALID = "valid"
    INVALID = "invalid"  # not JSON, or JSON that breaks the schema: ask once more, then invalid_output
    TRUNCATED = "truncated"  # cut by the token limit: output_truncated, no re-ask (it would be cut again)


@dataclass(frozen=True)
class CheckedAnswer:
    """A verdict, the parsed value when VALID, and where it broke the schema when INVALID."""

    verdict: AnswerVerdict
    value: Any = None
    problem: str | None = None


def check_answer(
    text: str, schema: dict[str, Any], validator: SchemaValidator, *, cut_by_limit: bool
) -> CheckedAnswer:
    """Parse and validate one structured answer (`cut_by_limit`: finish_reason was `length`)."""
    if cut_by_limit:
        return CheckedAnswer(AnswerVerdict.TRUNCATED)
    try:
        value = json.loads(text)
    except ValueError:
        return CheckedAnswer(AnswerVerdict.INVALID, problem="")
    problem = validator.first_problem(value, schema)
    if problem is not None:
        return CheckedAnswer(AnswerVerdict.INVALID, problem=problem)
    return CheckedAnswer(AnswerVerdict.VALID, value=value)
