"""Structured extraction's schemas: the strict subset checked at submit, the nullable variant of map
steps, the local model's instance of a schema, and the check of an answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from outlast.local.fake_model.schema_instance import schema_instance
from shared.adapters.json_schema import JsonSchemaValidator
from shared.extraction.answers import AnswerVerdict, check_answer
from shared.extraction.nullable import nullable_variant
from shared.extraction.schema_subset import MAX_OBJECT_DEPTH, MAX_PROPERTIES, MAX_SCHEMA_BYTES, schema_problem

VALIDATOR = JsonSchemaValidator()


def obj(**properties: Any) -> dict[str, Any]:
    """An object schema in the strict subset: every property required, nothing else allowed."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


INVOICE = obj(
    vendor={"type": "string", "description": "Who sent the invoice"},
    total={"type": "number", "minimum": 0},
    currency={"type": "string", "enum": ["EUR", "USD"]},
    paid={"type": "boolean"},
    issued={"type": "string", "format": "date"},
    lines={
        "type": "array",
        "items": obj(item={"type": "string"}, count={"type": "integer"}),
        "maxItems": 5,
    },
    note={"anyOf": [{"type": "string"}, {"type": "null"}]},
    reference={"type": ["string", "null"]},
)


# --- the subset ---------------------------------------------------------------------------------


def test_a_schema_inside_the_subset_has_no_problem() -> None:
    assert schema_problem(INVOICE) is None


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"type": "string"}, "/"),
        ({"anyOf": [obj(a={"type": "string"})]}, "/"),
        ([], "/"),
        ({**obj(a={"type": "string"}), "required": []}, "/required"),
        ({**obj(a={"type": "string"}), "required": ["a", "a"]}, "/required"),
        (
            {k: v for k, v in obj(a={"type": "string"}).items() if k != "additionalProperties"},
            "/additionalProperties",
        ),
        ({**obj(a={"type": "string"}), "additionalProperties": True}, "/additionalProperties"),
        ({"type": "object", "required": [], "additionalProperties": False}, "/properties"),
        (obj(a={"type": "text"}), "/properties/a/type"),
        (obj(a={"type": ["string", "string"]}), "/properties/a/type"),
        (obj(a={}), "/properties/a/type"),
        (obj(a={"type": "string", "minLength": 2}), "/properties/a/minLength"),
        (obj(a={"type": "string", "format": "uri"}), "/properties/a/format"),
        (obj(a={"type": "integer", "pattern": "x"}), "/properties/a/pattern"),
        (obj(a={"type": "array"}), "/properties/a/items"),
        (obj(a={"type": "array", "items": {"type": "object"}}), "/properties/a/items/properties"),
        (obj(a={"oneOf": [{"type": "string"}]}), "/properties/a/oneOf"),
        (obj(a={"$ref": "#/$defs/x"}), "/properties/a/$ref"),
        (obj(a={"anyOf": []}), "/properties/a/anyOf"),
        (obj(a={"anyOf": [{"type": "string"}], "type": "string"}), "/properties/a/type"),
        (obj(a={"anyOf": [{"type": "string"}, {"type": "nope"}]}), "/properties/a/anyOf/1/type"),
        (obj(a={"enum": []}), "/properties/a/enum"),
        (obj(a={"enum": [{"x": 1}]}), "/properties/a/enum"),
        (obj(a={"enum": ["x"], "minimum": 1}), "/properties/a/minimum"),
        (obj(**{"a/b": {"type": "bool"}}), "/properties/a~1b/type"),
        (obj(a="string"), "/properties/a"),
    ],
)
def test_a_schema_outside_the_subset_is_refused_at_its_first_problem(schema: Any, pointer: str) -> None:
    problem = schema_problem(schema)

    assert problem is not None
    assert problem.pointer == pointer
    assert problem.reason


def test_objects_may_nest_five_levels_deep_and_no_more() -> None:
    def nested(levels: int) -> dict[str, Any]:
        schema = obj(leaf={"type": "string"})
        for _ in range(levels - 1):
            schema = obj(child=schema)
        return schema

    assert schema_problem(nested(MAX_OBJECT_DEPTH)) is None
    problem = schema_problem(nested(MAX_OBJECT_DEPTH + 1))
    assert problem is not None
    assert problem.pointer == "/properties/child" * (MAX_OBJECT_DEPTH - 1) + "/properties/child"


def test_at_most_a_hundred_properties_in_all() -> None:
    half = {f"p{i}": {"type": "string"} for i in range(MAX_PROPERTIES // 2)}
    within = obj(
        a=obj(**half), b=obj(**{f"q{i}": {"type": "string"} for i in range(MAX_PROPERTIES // 2 - 2)})
    )
    over = obj(a=obj(**half), b=obj(**half))

    assert schema_problem(within) is None
    problem = schema_problem(over)
    assert problem is not None
    assert problem.pointer == "/properties/b/properties"


def test_a_schema_over_fifteen_kilobytes_is_refused_before_it_is_walked() -> None:
    big = obj(a={"type": "string", "description": "x" * MAX_SCHEMA_BYTES})

    problem = schema_problem(big)

    assert problem is not None
    assert problem.pointer == "/"


# --- the nullable variant -----------------------------------------------------------------------


def test_every_property_at_every_level_may_be_null_in_the_variant() -> None:
    variant = nullable_variant(INVOICE)
    all_null = dict.fromkeys(INVOICE["properties"])
    line_of_nulls = {**all_null, "lines": [{"item": None, "count": None}]}

    assert schema_problem(variant) is None
    assert VALIDATOR.first_problem(all_null, variant) is None
    assert VALIDATOR.first_problem(line_of_nulls, variant) is None
    assert VALIDATOR.first_problem(all_null, INVOICE) is not None


def test_the_variant_leaves_nullable_properties_as_they_are_and_the_original_untouched() -> None:
    before = json.dumps(INVOICE, sort_keys=True)

    variant = nullable_variant(INVOICE)

    assert variant["properties"]["note"] == INVOICE["properties"]["note"]
    assert variant["properties"]["reference"] == INVOICE["properties"]["reference"]
    assert variant["required"] == INVOICE["required"]
    assert json.dumps(INVOICE, sort_keys=True) == before


# --- the local model's instance -----------------------------------------------------------------


def test_the_instance_matches_the_schema_and_is_made_of_the_words_in_order() -> None:
    words = ["Acme", "invoice", "for", "tools"]

    instance = schema_instance(INVOICE, words)

    assert VALIDATOR.first_problem(instance, INVOICE) is None
    assert instance["vendor"] == "Acme"
    assert instance == schema_instance(INVOICE, words)
    assert instance != schema_instance(INVOICE, ["other", "words", "entirely", "here"])


def test_a_map_steps_nullable_schema_still_gets_values_not_nulls() -> None:
    instance = schema_instance(nullable_variant(INVOICE), ["Acme"])

    assert instance["vendor"] == "Acme"
    assert VALIDATOR.first_problem(instance, INVOICE) is None


# Schemas in the subset, generated: the checker accepts them, the local model's instance of each
# validates, and so does its nullable variant.
LEAVES = st.sampled_from(
    [
        {"type": "string"},
        {"type": "string", "format": "date-time"},
        {"type": "integer", "minimum": 3, "maximum": 9},
        {"type": "number", "exclusiveMinimum": 0},
        {"type": "boolean"},
        {"type": "null"},
        {"type": ["string", "null"]},
        {"enum": ["red", "green", 3, None]},
    ]
)
NAMES = st.text(alphabet="abc/~", min_size=1, max_size=4)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.dictionaries(NAMES, children, min_size=1, max_size=4).map(lambda props: obj(**props)),
        children.map(lambda items: {"type": "array", "items": items, "minItems": 1}),
        st.lists(children, min_size=1, max_size=3).map(lambda branches: {"anyOf": branches}),
    )


SCHEMAS = st.dictionaries(NAMES, st.recursive(LEAVES, _extend, max_leaves=12), min_size=1, max_size=5).map(
    lambda props: obj(**props)
)


@settings(max_examples=150, deadline=None)
@given(schema=SCHEMAS, words=st.lists(st.text(min_size=1, max_size=8), max_size=6))
def test_generated_schemas_in_the_subset_get_instances_that_validate(schema: Any, words: list[str]) -> None:
    if schema_problem(schema) is not None:  # deeper than five objects, say: not in the subset
        return
    instance = schema_instance(schema, words)
    variant = nullable_variant(schema)

    assert VALIDATOR.first_problem(instance, schema) is None
    assert schema_problem(variant) is None
    assert VALIDATOR.first_problem(instance, variant) is None


# --- an answer checked --------------------------------------------------------------------------


def test_a_valid_answer_is_parsed() -> None:
    answer = json.dumps(schema_instance(INVOICE, ["Acme"]))

    checked = check_answer(answer, INVOICE, VALIDATOR, cut_by_limit=False)

    assert checked.verdict is AnswerVerdict.VALID
    assert checked.value["vendor"] == "Acme"


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ('{"vendor": "Acme"', ""),
        ("not json", ""),
        (json.dumps({**schema_instance(INVOICE, ["x"]), "total": -1}), "/total"),
        (json.dumps({**schema_instance(INVOICE, ["x"]), "extra": 1}), ""),
        (json.dumps({**schema_instance(INVOICE, ["x"]), "issued": "yesterday"}), "/issued"),
    ],
)
def test_an_answer_that_is_not_json_or_breaks_the_schema_is_invalid(answer: str, problem: str) -> None:
    checked = check_answer(answer, INVOICE, VALIDATOR, cut_by_limit=False)

    assert checked.verdict is AnswerVerdict.INVALID
    assert checked.problem == problem
    assert checked.value is None


def test_an_answer_cut_by_its_token_limit_is_truncated_whatever_it_holds() -> None:
    answer = json.dumps(schema_instance(INVOICE, ["Acme"]))

    checked = check_answer(answer, INVOICE, VALIDATOR, cut_by_limit=True)

    assert checked.verdict is AnswerVerdict.TRUNCATED
