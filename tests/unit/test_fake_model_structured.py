"""The fake model's structured answers (DESIGN.md, "Structured extraction"): a `json_schema` response
format gets an instance of the schema made of the document's words, `[[fault:invalid_json*N]]`
breaks the first N, an answer over `max_tokens` is cut with finish_reason `length`, and a strict
schema outside the subset is refused as OpenAI refuses it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outlast.local.fake_model.model import FakeModel
from outlast.local.fake_model.structured import UNEXPECTED_PROPERTY, merged_words
from shared.adapters.json_schema import JsonSchemaValidator
from shared.contract import Operation
from shared.extraction.nullable import nullable_variant
from shared.prompts import MAP_TEMPLATES, REDUCE_TEMPLATES, template_for
from tests.unit.test_fake_model import answered, body, call

pytestmark = pytest.mark.unit

KEY = "Bearer local"
VALIDATOR = JsonSchemaValidator()
INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "vendor": {"type": "string"},
        "total": {"type": "number"},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"item": {"type": "string"}},
                "required": ["item"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["vendor", "total", "lines"],
    "additionalProperties": False,
}
TEXT = "Acme invoiced hammers and nails."


def json_schema(schema: dict[str, Any] = INVOICE, *, strict: bool = True) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "extraction", "schema": schema, "strict": strict}}


def extract(text: str = TEXT) -> list[dict[str, str]]:
    return template_for(Operation.EXTRACT).render(text)


def content_of(completion: dict[str, Any]) -> str:
    return str(completion["choices"][0]["message"]["content"])


def test_a_json_schema_request_gets_an_instance_made_of_the_documents_words() -> None:
    status, completion = call(FakeModel(), extract(), response_format=json_schema())

    answer = json.loads(content_of(completion))
    assert status == 200
    assert VALIDATOR.first_problem(answer, INVOICE) is None
    assert answer["vendor"] == "Acme"
    assert answer["lines"][0]["item"] == "hammers"  # the words in order, after the vendor's and the total's
    assert completion["choices"][0]["finish_reason"] == "stop"


def test_a_map_call_under_the_nullable_variant_still_gets_values() -> None:
    messages = MAP_TEMPLATES[Operation.EXTRACT].render(TEXT, part=2, parts=3)

    _, completion = call(FakeModel(), messages, response_format=json_schema(nullable_variant(INVOICE)))

    assert json.loads(content_of(completion))["vendor"] == "Acme"


def test_a_reduce_merges_the_string_values_of_its_parts_in_order() -> None:
    parts = ['{"vendor": "Acme", "total": 3.5, "lines": []}', '{"vendor": null, "lines": [{"item": "saw"}]}']
    messages = REDUCE_TEMPLATES[Operation.EXTRACT].render_parts(parts)

    _, completion = call(FakeModel(), messages, response_format=json_schema())

    answer = json.loads(content_of(completion))
    assert merged_words(parts) == ["Acme", "saw"]
    assert merged_words(["not json at all"]) == ["not", "json", "at", "all"]
    assert answer["vendor"] == "Acme"
    assert VALIDATOR.first_problem(answer, INVOICE) is None


def test_invalid_json_breaks_the_first_answers_then_they_match_and_the_log_says_so() -> None:
    model = FakeModel()
    messages = extract("[[fault:invalid_json*1]] " + TEXT)

    first = json.loads(content_of(call(model, messages, response_format=json_schema())[1]))
    second = json.loads(content_of(call(model, messages, response_format=json_schema())[1]))

    assert UNEXPECTED_PROPERTY in first
    assert VALIDATOR.first_problem(first, INVOICE) is not None
    assert VALIDATOR.first_problem(second, INVOICE) is None
    log = model.calls()
    assert [entry["outcome"] for entry in log] == ["invalid_json", "ok"]
    assert all(entry["status"] == 200 and entry["usage"]["outputTokens"] > 0 for entry in log)
    assert "fault" not in content_of(call(model, messages)[1])  # a text answer never holds a directive


def test_an_answer_over_max_tokens_is_cut_with_finish_reason_length() -> None:
    _, completion = call(FakeModel(), extract(), response_format=json_schema(), max_tokens=4)

    assert completion["choices"][0]["finish_reason"] == "length"
    with pytest.raises(json.JSONDecodeError):
        json.loads(content_of(completion))


def test_a_streamed_structured_answer_joins_to_the_json_and_can_be_broken_too() -> None:
    model = FakeModel()
    messages = extract("[[fault:invalid_json*1]] streamed " + TEXT)
    fields = {"response_format": json_schema(), "stream": True}

    turn = model.take(body(messages, **fields), KEY)
    broken = turn.streamed_answer()
    again = model.take(body(messages, **fields), KEY).streamed_answer()

    assert turn.streams
    assert turn.streamed("ok", broken, broken.content).outcome == "invalid_json"
    assert UNEXPECTED_PROPERTY in json.loads("".join(broken.pieces))
    assert VALIDATOR.first_problem(json.loads("".join(again.pieces)), INVOICE) is None


@pytest.mark.parametrize(
    "response_format",
    [
        json_schema({"type": "object", "properties": {"a": {"type": "string"}}}),  # no required
        {"type": "json_schema", "json_schema": {"schema": INVOICE}},  # no name
        {"type": "json_schema", "json_schema": {"name": "x", "schema": "object"}},
        {"type": "xml"},
    ],
)
def test_a_response_format_openai_refuses_is_400(response_format: dict[str, Any]) -> None:
    model = FakeModel()
    model.begin_call()

    status, error = answered(model, model.take(body(extract(), response_format=response_format), KEY))

    assert status == 400
    assert error["error"]["type"] == "invalid_request_error"


def test_a_loose_schema_is_answered_when_not_strict_and_text_formats_get_text() -> None:
    loose = {"type": "object", "properties": {"a": {"type": "string"}}}

    _, lenient = call(FakeModel(), extract(), response_format=json_schema(loose, strict=False))
    _, text = call(FakeModel(), extract(), response_format={"type": "text"})

    assert json.loads(content_of(lenient)) == {"a": "Acme"}
    with pytest.raises(json.JSONDecodeError):
        json.loads(content_of(text))
