"""The schema a map step extracts under: every property may be null.

A map step sees one part of a long document. Under the original schema it would have to invent
a value for a property its part does not mention; under this variant "not in this part" is
expressible as null, and the reduce steps, under the original schema, merge what the parts
found (DESIGN.md, "Structured extraction"). The variant stays inside the strict subset: every
object still lists all its properties as required, and each property becomes `anyOf [T, null]`.
"""

from __future__ import annotations

from typing import Any

_NULL: dict[str, Any] = {"type": "null"}


def _accepts_null(schema: dict[str, Any]) -> bool:
    declared = schema.get("type")
    if declared == "null" or (isinstance(declared, list) and "null" in declared):
        return True
    if "enum" in schema and None in schema["enum"]:
        return True
    return any(_accepts_null(branch) for branch in schema.get("anyOf", []))


def _inner(schema: dict[str, Any]) -> dict[str, Any]:
    """The same schema with the nullable variant applied to the objects inside it."""
    if "anyOf" in schema:
        return {**schema, "anyOf": [_inner(branch) for branch in schema["anyOf"]]}
    out = dict(schema)
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {name: nullable(child) for name, child in schema["properties"].items()}
    if isinstance(schema.get("items"), dict):
        out["items"] = _inner(schema["items"])
    return out


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as a property's value that may also be null."""
    inner = _inner(schema)
    if _accepts_null(inner):
        return inner
    return {"anyOf": [inner, _NULL]}


def nullable_variant(schema: dict[str, Any]) -> dict[str, Any]:
    """The root object of `schema` with every property, at every level, allowed to be null."""
    return _inner(schema)
