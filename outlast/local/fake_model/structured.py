"""The fake model's structured answers: a `json_schema` response format gets an instance of the schema.

DESIGN.md, "Structured extraction". The answer is `schema_instance(schema, words)`: the words of
the document for a whole input or a part (a map call), and for a reduce call the string values of
the objects it merges, in order, so a merged object carries what its parts found (a part that is
no JSON object gives its words). `[[fault:invalid_json*N]]`, counted like the other counted
faults, makes the first N answers break the schema: the instance with a property the schema does
not have (every object of the strict subset sets `additionalProperties: false`). The request's
format is read (and a strict schema outside the subset refused) in outlast.local.fake_model.requests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from outlast.local.fake_model.schema_instance import schema_instance

# What a broken answer adds: a property no schema of the strict subset allows at its root.
UNEXPECTED_PROPERTY = "unexpected_property"
_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")


def words_of(text: str) -> list[str]:
    """The words of a text, in order."""
    return _WORD.findall(text)


def merged_words(parts: list[str]) -> list[str]:
    """The words a reduce answers from: each part's string values in order (its words when it is no JSON)."""
    words: list[str] = []
    for part in parts:
        try:
            value = json.loads(part)
        except ValueError:
            words.extend(words_of(part))
            continue
        words.extend(_strings(value))
    return words


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for child in value.values():
            yield from _strings(child)
    elif isinstance(value, list):
        for child in value:
            yield from _strings(child)


def structured_answer(schema: dict[str, Any], words: list[str], *, broken: bool = False) -> str:
    """The JSON text of the schema's instance made of `words`; `broken`: one that breaks the schema."""
    instance = schema_instance(schema, words)
    if broken:
        instance = {**instance, UNEXPECTED_PROPERTY: True} if isinstance(instance, dict) else [instance]
    return json.dumps(instance, ensure_ascii=False)
