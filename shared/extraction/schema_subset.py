"""The JSON Schema subset that strict structured outputs accept, checked at submit without a validator.

DESIGN.md, "Structured extraction": an object root; every object lists all its properties in
`required` and sets `additionalProperties: false`; the types string, number, integer, boolean,
null, array and object, `enum` and `anyOf`; at most 100 properties, 5 levels of object nesting
and 15 KB. A schema outside it would be refused by the provider on the first call, after the
job was accepted and its budget reserved; refusing it at submit, with the JSON pointer of the
first problem, lets the client fix it at once. This is a walk over dicts and lists: the API
functions import no JSON Schema library (cold start), only the worker does, to validate answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MAX_PROPERTIES = 100
MAX_OBJECT_DEPTH = 5
MAX_SCHEMA_BYTES = 15_000  # of the schema's compact JSON

TYPES = frozenset({"string", "number", "integer", "boolean", "null", "array", "object"})
STRING_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# Keywords any schema may carry: annotations the provider reads as hints and validators ignore.
_ANNOTATIONS = frozenset({"description", "title"})
_BY_TYPE: Mapping[str, frozenset[str]] = {
    "string": frozenset({"pattern", "format"}),
    "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
    "integer": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
    "array": frozenset({"items", "minItems", "maxItems"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
    "boolean": frozenset(),
    "null": frozenset(),
}

_KNOWN = _ANNOTATIONS | {"type", "enum", "anyOf"} | frozenset().union(*_BY_TYPE.values())


@dataclass(frozen=True)
class SchemaProblem:
    """Where a schema leaves the subset (an RFC 6901 JSON pointer into it) and why."""

    pointer: str
    reason: str


def _pointer(parent: str, token: str | int) -> str:
    escaped = str(token).replace("~", "~0").replace("/", "~1")
    return f"{parent}/{escaped}"


def _types_of(node: Mapping[str, Any]) -> list[str]:
    declared = node.get("type")
    return [declared] if isinstance(declared, str) else list(declared or [])


class _Walk:
    """One pass over a schema; `problems()` yields them in document order, the first one first."""

    def __init__(self) -> None:
        self.properties = 0

    def node(self, node: Any, at: str, depth: int) -> Iterator[SchemaProblem]:
        if not isinstance(node, dict):
            yield SchemaProblem(at or "/", "a schema must be a JSON object")
            return
        if "anyOf" in node:
            yield from self._any_of(node, at, depth)
            return
        if "enum" in node:
            yield from self._enum(node, at)
            return
        yield from self._typed(node, at, depth)

    def _typed(self, node: Mapping[str, Any], at: str, depth: int) -> Iterator[SchemaProblem]:
        unknown = [keyword for keyword in node if keyword not in _KNOWN]
        if unknown:  # oneOf, $ref, not, ...: say which keyword, not that the type is missing
            yield SchemaProblem(_pointer(at, unknown[0]), f"{unknown[0]} is not supported")
            return
        types = _types_of(node)
        if not types or not all(isinstance(t, str) and t in TYPES for t in types):
            yield SchemaProblem(_pointer(at, "type"), f"type must be one of {', '.join(sorted(TYPES))}")
            return
        if len(set(types)) != len(types):
            yield SchemaProblem(_pointer(at, "type"), "type lists a type twice")
            return
        allowed = _ANNOTATIONS | {"type"} | frozenset().union(*(_BY_TYPE[t] for t in types))
        for keyword in node:
            if keyword not in allowed:
                yield SchemaProblem(_pointer(at, keyword), f"{keyword} is not supported here")
                return
        if "format" in node and node["format"] not in STRING_FORMATS:
            yield SchemaProblem(_pointer(at, "format"), "format is not one of the supported formats")
            return
        if "object" in types:
            yield from self._object(node, at, depth + 1)
        if "array" in types:
            yield from self._array(node, at, depth)

    def _object(self, node: Mapping[str, Any], at: str, depth: int) -> Iterator[SchemaProblem]:
        if depth > MAX_OBJECT_DEPTH:
            yield SchemaProblem(at or "/", f"objects nest deeper than {MAX_OBJECT_DEPTH} levels")
            return
        properties = node.get("properties")
        if not isinstance(properties, dict):
            yield SchemaProblem(_pointer(at, "properties"), "an object must list its properties")
            return
        if node.get("additionalProperties") is not False:
            yield SchemaProblem(_pointer(at, "additionalProperties"), "additionalProperties must be false")
            return
        required = node.get("required")
        if not isinstance(required, list) or sorted(map(str, required)) != sorted(properties):
            yield SchemaProblem(_pointer(at, "required"), "required must list every property, once")
            return
        self.properties += len(properties)
        if self.properties > MAX_PROPERTIES:
            yield SchemaProblem(_pointer(at, "properties"), f"more than {MAX_PROPERTIES} properties in all")
            return
        for name, child in properties.items():
            yield from self.node(child, _pointer(_pointer(at, "properties"), name), depth)

    def _array(self, node: Mapping[str, Any], at: str, depth: int) -> Iterator[SchemaProblem]:
        if "items" not in node:
            yield SchemaProblem(_pointer(at, "items"), "an array must say what its items are")
            return
        yield from self.node(node["items"], _pointer(at, "items"), depth)

    def _any_of(self, node: Mapping[str, Any], at: str, depth: int) -> Iterator[SchemaProblem]:
        extra = sorted(set(node) - _ANNOTATIONS - {"anyOf"})
        if extra:
            yield SchemaProblem(_pointer(at, extra[0]), "anyOf takes no other keywords")
            return
        branches = node["anyOf"]
        if not isinstance(branches, list) or not branches:
            yield SchemaProblem(_pointer(at, "anyOf"), "anyOf must be a non-empty list of schemas")
            return
        for index, branch in enumerate(branches):
            yield from self.node(branch, _pointer(_pointer(at, "anyOf"), index), depth)

    def _enum(self, node: Mapping[str, Any], at: str) -> Iterator[SchemaProblem]:
        extra = sorted(set(node) - _ANNOTATIONS - {"enum", "type"})
        if extra:
            yield SchemaProblem(_pointer(at, extra[0]), "enum takes no other keywords but type")
            return
        values = node["enum"]
        if not isinstance(values, list) or not values:
            yield SchemaProblem(_pointer(at, "enum"), "enum must be a non-empty list")
            return
        if not all(value is None or isinstance(value, str | int | float | bool) for value in values):
            yield SchemaProblem(
                _pointer(at, "enum"), "enum values must be strings, numbers, booleans or null"
            )


def schema_bytes(schema: Any) -> int:
    """The UTF-8 bytes of the schema's compact JSON: what the size limit and a budget count."""
    return len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def schema_problem(schema: Any) -> SchemaProblem | None:
    """The first place where `schema` leaves the subset, or None when it is inside it."""
    if schema_bytes(schema) > MAX_SCHEMA_BYTES:
        return SchemaProblem("/", f"the schema is over {MAX_SCHEMA_BYTES} bytes")
    if not isinstance(schema, dict) or _types_of(schema) != ["object"] or "anyOf" in schema:
        return SchemaProblem("/", "the root must be an object schema (type: object)")
    return next(_Walk().node(schema, "", 0), None)
