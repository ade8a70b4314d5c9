"""The local model's structured answer: a deterministic instance of a JSON Schema, made of the input's words.

A `json_schema` response format asks the provider for an object that matches the schema
(strict structured outputs). The local model server answers with this instance: every value
comes from the words of the document it was given, in order, so the same request always gets
the same answer and a test can tell which part of a document a value came from. It covers the
subset shared.extraction.schema_subset accepts; a `pattern` is not honoured (a word is used as
it is), which the worker's validation then reports like any other answer that breaks the schema.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

_FORMATS: dict[str, str] = {
    "date-time": "2026-01-02T03:04:05Z",
    "date": "2026-01-02",
    "time": "03:04:05Z",
    "duration": "P1D",
    "email": "someone@example.com",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uuid": "00000000-0000-4000-8000-000000000000",
}
_FALLBACK_WORDS = ("nothing",)


class _Words:
    """The document's words, handed out in order and round again when they run out."""

    def __init__(self, words: Sequence[str]) -> None:
        self._cycle: Iterator[str] = itertools.cycle(words or _FALLBACK_WORDS)

    def next(self) -> str:
        return next(self._cycle)


def _types(schema: dict[str, Any]) -> list[str]:
    declared = schema.get("type")
    return [declared] if isinstance(declared, str) else list(declared or [])


def _number(schema: dict[str, Any], word: str, *, integer: bool) -> int | float:
    value: float = len(word) if integer else len(word) + 0.5
    if "minimum" in schema:
        value = max(value, schema["minimum"])
    if "exclusiveMinimum" in schema:
        value = max(value, schema["exclusiveMinimum"] + 1)
    if "maximum" in schema:
        value = min(value, schema["maximum"])
    if "exclusiveMaximum" in schema:
        value = min(value, schema["exclusiveMaximum"] - 1)
    if "multipleOf" in schema:
        step = schema["multipleOf"]
        value = round(value / step) * step
    return int(value) if integer else float(value)


def _array(schema: dict[str, Any], words: _Words) -> list[Any]:
    count = max(int(schema.get("minItems", 0)), 2)
    count = min(count, int(schema.get("maxItems", count)))
    return [_instance(schema.get("items", {}), words) for _ in range(count)]


def _instance(schema: dict[str, Any], words: _Words) -> Any:  # noqa: PLR0911 - one branch per type
    if "anyOf" in schema:
        # The first branch that is not null: a map step's nullable property still gets a value.
        branches = [b for b in schema["anyOf"] if _types(b) != ["null"]] or schema["anyOf"]
        return _instance(branches[0], words)
    if "enum" in schema:
        values = schema["enum"]
        return values[len(words.next()) % len(values)]
    kinds = [kind for kind in _types(schema) if kind != "null"] or ["null"]
    kind = kinds[0]
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: _instance(child, words) for name, child in properties.items()}
    if kind == "array":
        return _array(schema, words)
    if kind == "string":
        return _FORMATS.get(str(schema.get("format")), words.next())
    if kind in {"integer", "number"}:
        return _number(schema, words.next(), integer=kind == "integer")
    if kind == "boolean":
        return len(words.next()) % 2 == 0
    return None


def schema_instance(schema: dict[str, Any], words: Sequence[str]) -> Any:
    """A value that matches `schema` (bar `pattern`), built deterministically from `words`."""
    return _instance(schema, _Words(words))
