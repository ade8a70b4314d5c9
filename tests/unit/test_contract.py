"""The submit body, validated as the Powertools resolver does: model_validate on the parsed JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from shared.contract import MAX_INPUT_TEXT_BYTES, BudgetDocument, Operation, StatusDocument, SubmitRequest

VALID_BODIES: dict[str, dict[str, Any]] = {
    "summarize": {"operation": "summarize", "input": {"text": "The quarterly report."}},
    "analyze with options": {
        "operation": "analyze",
        "input": {"text": "The quarterly report."},
        "options": {"model": "gpt-4o-mini", "maxOutputTokens": 256},
    },
    "classify": {
        "operation": "classify",
        "input": {"text": "Win a free cruise!"},
        "options": {"labels": ["spam", "ham"], "maxOutputTokens": 5},
    },
}


def parse(body: Any) -> SubmitRequest:
    """What the resolver does with a request body: JSON text -> dict -> the model."""
    return SubmitRequest.model_validate(json.loads(json.dumps(body)))


def errors_of(body: Any) -> list[tuple[tuple[int | str, ...], str]]:
    with pytest.raises(ValidationError) as caught:
        parse(body)
    return [(tuple(error["loc"]), error["type"]) for error in caught.value.errors()]


def summarize(**options: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"operation": "summarize", "input": {"text": "hello"}}
    if options:
        body["options"] = options
    return body


def classify(labels: Any) -> dict[str, Any]:
    return {"operation": "classify", "input": {"text": "hello"}, "options": {"labels": labels}}


def text_body(text: str) -> dict[str, Any]:
    return {"operation": "summarize", "input": {"text": text}}


@pytest.mark.parametrize("body", VALID_BODIES.values(), ids=VALID_BODIES.keys())
def test_a_valid_body_of_each_operation_parses(body: dict[str, Any]) -> None:
    # When
    request = parse(body)

    # Then
    assert request.operation is Operation(body["operation"])
    assert request.input.text == body["input"]["text"]


def test_options_arrive_under_their_wire_names() -> None:
    request = parse(VALID_BODIES["classify"])

    assert request.options is not None
    assert request.options.labels == ["spam", "ham"]
    assert request.options.max_output_tokens == 5


@pytest.mark.parametrize(
    ("body", "location"),
    [
        ({**summarize(), "priority": "high"}, ("priority",)),
        ({"operation": "summarize", "input": {"text": "x", "language": "en"}}, ("input", "language")),
        (summarize(temperature=0.2), ("options", "temperature")),
        # The wire is camelCase only: the Python field name is an unknown field.
        (summarize(max_output_tokens=5), ("options", "max_output_tokens")),
    ],
    ids=["top level", "input", "options", "snake case name"],
)
def test_an_unknown_field_at_any_level_is_refused(body: dict[str, Any], location: tuple[str, ...]) -> None:
    assert errors_of(body) == [(location, "extra_forbidden")]


@pytest.mark.parametrize(
    ("body", "location"),
    [
        ({"operation": None, "input": {"text": "x"}}, ()),
        ({"operation": "summarize", "input": None}, ()),
        ({**summarize(), "options": None}, ()),
        ({"operation": "summarize", "input": {"text": None}}, ("input",)),
        (summarize(model=None), ("options",)),
        (summarize(maxOutputTokens=None), ("options",)),
        (summarize(labels=None), ("options",)),
    ],
    ids=["operation", "input", "options", "input.text", "model", "maxOutputTokens", "labels"],
)
def test_an_explicit_null_at_any_level_is_refused(body: dict[str, Any], location: tuple[str, ...]) -> None:
    assert errors_of(body) == [(location, "null_not_allowed")]


def test_a_null_label_is_refused() -> None:
    assert errors_of(classify(["spam", None])) == [(("options", "labels", 1), "string_type")]


@pytest.mark.parametrize(
    ("body", "location"),
    [
        (summarize(maxOutputTokens="5"), ("options", "maxOutputTokens")),
        (summarize(maxOutputTokens=True), ("options", "maxOutputTokens")),
        (summarize(maxOutputTokens=5.0), ("options", "maxOutputTokens")),
        (text_body(5), ("input", "text")),  # type: ignore[arg-type]
        (text_body(True), ("input", "text")),  # type: ignore[arg-type]
        ({"operation": "summarize", "input": ["hello"]}, ("input",)),
        ({"operation": "summarize", "input": "hello"}, ("input",)),
        ({**summarize(), "options": []}, ("options",)),
        (summarize(model=4), ("options", "model")),
        (classify("spam"), ("options", "labels")),
        (classify([1, 2]), ("options", "labels", 0)),
    ],
    ids=[
        "string for int",
        "bool for int",
        "float for int",
        "int for text",
        "bool for text",
        "list for input",
        "string for input",
        "list for options",
        "int for model",
        "string for labels",
        "int labels",
    ],
)
def test_a_wrong_type_is_refused_without_coercion(body: dict[str, Any], location: tuple[str, ...]) -> None:
    assert [where for where, _ in errors_of(body)][:1] == [location]


@pytest.mark.parametrize("operation", ["translate", "Summarize", "SUMMARIZE", "", 1])
def test_an_unknown_operation_is_refused(operation: Any) -> None:
    assert errors_of({"operation": operation, "input": {"text": "x"}}) == [(("operation",), "enum")]


@pytest.mark.parametrize("body", [{"input": {"text": "x"}}, {"operation": "summarize"}, {}])
def test_a_missing_required_field_is_refused(body: dict[str, Any]) -> None:
    assert {error_type for _, error_type in errors_of(body)} == {"missing"}


def test_an_empty_text_is_refused() -> None:
    assert errors_of(text_body("")) == [(("input", "text"), "string_too_short")]


class TestLabels:
    @pytest.mark.parametrize(
        "body",
        [
            {"operation": "classify", "input": {"text": "x"}},
            {"operation": "classify", "input": {"text": "x"}, "options": {"maxOutputTokens": 5}},
        ],
        ids=["no options", "options without labels"],
    )
    def test_classify_without_labels_is_refused(self, body: dict[str, Any]) -> None:
        assert errors_of(body) == [((), "labels_required")]

    def test_an_empty_label_list_is_refused(self) -> None:
        assert errors_of(classify([])) == [(("options", "labels"), "too_short")]

    def test_one_and_fifty_labels_are_accepted(self) -> None:
        assert parse(classify(["only"])).options is not None
        assert parse(classify([f"label-{n}" for n in range(50)])).options is not None

    def test_fifty_one_labels_are_refused(self) -> None:
        assert errors_of(classify([f"label-{n}" for n in range(51)])) == [(("options", "labels"), "too_long")]

    @pytest.mark.parametrize("label", ["", " ", "\t\n"])
    def test_a_blank_label_is_refused(self, label: str) -> None:
        assert [where for where, _ in errors_of(classify(["spam", label]))] == [("options", "labels", 1)]

    def test_a_label_may_have_100_characters_but_not_101(self) -> None:
        assert parse(classify(["x" * 100])).options is not None
        assert errors_of(classify(["x" * 101])) == [(("options", "labels", 0), "string_too_long")]

    def test_repeated_labels_are_refused(self) -> None:
        assert errors_of(classify(["spam", "ham", "spam"])) == [
            (("options", "labels"), "labels_not_distinct")
        ]

    @pytest.mark.parametrize("operation", ["summarize", "analyze"])
    def test_labels_are_refused_for_other_operations(self, operation: str) -> None:
        body = {"operation": operation, "input": {"text": "x"}, "options": {"labels": ["spam"]}}

        assert errors_of(body) == [((), "labels_not_allowed")]


@pytest.mark.parametrize("tokens", [1, 4096])
def test_max_output_tokens_accepts_its_bounds(tokens: int) -> None:
    request = parse(summarize(maxOutputTokens=tokens))

    assert request.options is not None
    assert request.options.max_output_tokens == tokens


@pytest.mark.parametrize(
    ("tokens", "error_type"),
    [(0, "greater_than_equal"), (-1, "greater_than_equal"), (4097, "less_than_equal")],
)
def test_max_output_tokens_refuses_values_out_of_bounds(tokens: int, error_type: str) -> None:
    assert errors_of(summarize(maxOutputTokens=tokens)) == [(("options", "maxOutputTokens"), error_type)]


class TestInputSize:
    """The limit is 1,048,576 UTF-8 bytes, not characters."""

    @pytest.mark.parametrize(
        "text",
        [
            "a" * MAX_INPUT_TEXT_BYTES,
            "é" * (MAX_INPUT_TEXT_BYTES // 2),
            "€" * (MAX_INPUT_TEXT_BYTES // 3) + "a",
            "😀" * (MAX_INPUT_TEXT_BYTES // 4),
        ],
        ids=["ascii", "2-byte", "3-byte", "4-byte"],
    )
    def test_text_of_exactly_the_limit_is_accepted(self, text: str) -> None:
        assert len(text.encode("utf-8")) == MAX_INPUT_TEXT_BYTES

        assert parse(text_body(text)).input.text == text

    @pytest.mark.parametrize(
        "text",
        [
            "a" * (MAX_INPUT_TEXT_BYTES + 1),
            "é" * (MAX_INPUT_TEXT_BYTES // 2) + "a",
            "€" * (MAX_INPUT_TEXT_BYTES // 3 + 1),
            "😀" * (MAX_INPUT_TEXT_BYTES // 4) + "a",
        ],
        ids=["ascii", "2-byte", "3-byte", "4-byte"],
    )
    def test_one_byte_more_is_input_too_large(self, text: str) -> None:
        assert len(text.encode("utf-8")) > MAX_INPUT_TEXT_BYTES

        assert errors_of(text_body(text)) == [(("input", "text"), "input_too_large")]

    def test_multibyte_text_is_measured_in_bytes_even_when_characters_are_few(self) -> None:
        text = "é" * (MAX_INPUT_TEXT_BYTES // 2 + 1)

        assert len(text) < MAX_INPUT_TEXT_BYTES
        assert errors_of(text_body(text)) == [(("input", "text"), "input_too_large")]


def test_a_lone_surrogate_is_refused_before_anything_encodes_it() -> None:
    body = json.loads(
        '{"operation": "classify", "input": {"text": "\\ud800"}, "options": {"labels": ["\\udfff"]}}'
    )

    with pytest.raises(ValidationError) as caught:
        SubmitRequest.model_validate(body)

    assert {error["type"] for error in caught.value.errors()} == {"string_unicode"}


def test_a_parsed_request_is_immutable() -> None:
    request = parse(VALID_BODIES["summarize"])

    with pytest.raises(ValidationError):
        request.operation = Operation.ANALYZE  # type: ignore[misc]


def test_the_status_document_always_says_what_it_holds_of_the_budget() -> None:
    # reservedTokens is required on the wire: a number while held, null otherwise
    schema = StatusDocument.model_json_schema(by_alias=True)

    assert "reservedTokens" in schema["required"]
    assert {branch.get("type") for branch in schema["properties"]["reservedTokens"]["anyOf"]} == {
        "integer",
        "null",
    }


def test_the_budget_document_on_the_wire() -> None:
    document = BudgetDocument(
        period="2030-01",
        limit_tokens=None,
        used_tokens=5,
        reserved_tokens=0,
        remaining_tokens=None,
        resets_at=datetime(2030, 2, 1, tzinfo=UTC),
    )

    assert document.to_wire() == {
        "period": "2030-01",
        "limitTokens": None,
        "usedTokens": 5,
        "reservedTokens": 0,
        "remainingTokens": None,
        "resetsAt": "2030-02-01T00:00:00.000Z",
    }


class TestStream:
    @pytest.mark.parametrize("operation", ["summarize", "analyze"])
    def test_summarize_and_analyze_may_stream(self, operation: str) -> None:
        # When
        request = parse({"operation": operation, "input": {"text": "x"}, "options": {"stream": True}})

        # Then
        assert request.stream is True

    def test_classify_may_not_stream(self) -> None:
        body = classify(["spam", "ham"])
        body["options"]["stream"] = True

        assert errors_of(body) == [((), "stream_not_supported")]

    def test_classify_may_say_it_does_not_stream(self) -> None:
        body = classify(["spam", "ham"])
        body["options"]["stream"] = False

        assert parse(body).stream is False

    def test_without_the_option_a_job_does_not_stream(self) -> None:
        assert parse(summarize()).stream is False

    @pytest.mark.parametrize("value", ["true", 1, None])
    def test_stream_is_a_json_boolean(self, value: Any) -> None:
        errors = errors_of(summarize(stream=value))

        assert [where for where, _ in errors] in ([("options", "stream")], [("options",)])
