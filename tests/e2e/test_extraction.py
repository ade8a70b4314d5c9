"""Structured extraction end to end (DESIGN.md, "Structured extraction"): extract jobs over HTTP
against the local model server, which answers a `json_schema` request with an instance of the
schema made of the input's words and obeys `[[fault:invalid_json*N]]`.

Every result is checked with the worker's own validator (jsonschema) against the schema sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.adapters.json_schema import JsonSchemaValidator
from tests.support.local_stack import (
    RunningStack,
    assert_problem,
    assert_status_document,
    joined_attempt,
    new_key,
    output_events,
    request_hash,
    unique,
)

pytestmark = pytest.mark.e2e

INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "vendor": {"type": "string", "description": "Who sent the invoice"},
        "total": {"type": "number", "minimum": 0},
        "currency": {"enum": ["EUR", "USD"]},
        "paid": {"type": "boolean"},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"item": {"type": "string"}, "count": {"type": "integer"}},
                "required": ["item", "count"],
                "additionalProperties": False,
            },
        },
        "note": {"type": ["string", "null"]},
    },
    "required": ["vendor", "total", "currency", "paid", "lines", "note"],
    "additionalProperties": False,
}
VALIDATOR = JsonSchemaValidator()


def _extract(text: str, schema: Any = INVOICE) -> dict[str, Any]:
    return {"operation": "extract", "input": {"text": text}, "options": {"schema": schema}}


def _run(stack: RunningStack, token: str, text: str) -> dict[str, Any]:
    answer = stack.submit(token, _extract(text))
    assert answer.status == 202, answer.raw
    document = stack.wait_terminal(answer.body["jobId"], token, timeout_seconds=120)
    assert_status_document(document, answer.body["jobId"])
    return document


def _result(stack: RunningStack, token: str, document: dict[str, Any]) -> Any:
    assert document["status"] == "Succeeded", document
    result = stack.call("GET", document["resultUrl"], token=token)
    assert result.status == 200
    assert result.body["operation"] == "extract"
    assert result.body["outputFormat"] == "json"
    assert result.body["usage"] == document["usage"]
    output = result.body["output"]
    assert VALIDATOR.first_problem(output, INVOICE) is None, output
    return output


def test_an_extract_job_on_a_short_text_returns_an_object_that_validates(stack: RunningStack) -> None:
    token = stack.token(unique("extract-short"))
    text = f"Acme invoiced {unique('tools')} for twelve hammers."

    document = _run(stack, token, text)

    output = _result(stack, token, document)
    assert document["progress"] == {"completedSteps": 1, "totalSteps": 1}
    assert output["vendor"] == "Acme"  # the local model's instance is made of the input's words
    assert document["attempts"] == 1


def test_a_long_text_runs_in_steps_and_the_merged_object_validates(stack: RunningStack) -> None:
    # Given a text of about 60 KB: several chunks of the stage's 6,000-token plan
    token = stack.token(unique("extract-long"))
    marker = unique("ledger")
    text = "\n\n".join(f"Part {n} {marker}: " + "Acme shipped the tools as agreed. " * 90 for n in range(20))

    document = _run(stack, token, text)

    output = _result(stack, token, document)
    steps = document["progress"]["totalSteps"]
    assert steps > 3
    assert document["progress"]["completedSteps"] == steps
    assert output["vendor"]


def test_an_invalid_answer_is_asked_again_and_both_calls_are_counted(stack: RunningStack) -> None:
    token = stack.token(unique("extract-reask"))
    text = f"Acme {unique('invoice')} once garbled. [[fault:invalid_json*1]]"

    document = _run(stack, token, text)

    _result(stack, token, document)
    calls = stack.model_calls(request_hash("extract", text), at_least=2)
    assert [call["status"] for call in calls] == [200, 200]
    assert document["attempts"] == 1  # the second ask was within the same claim
    served = {
        "inputTokens": sum(call["usage"]["inputTokens"] for call in calls),
        "outputTokens": sum(call["usage"]["outputTokens"] for call in calls),
        "estimated": False,
        "cachedInputTokens": 0,
        "tiers": ["standard"],
    }
    assert document["usage"] == served


def test_an_answer_that_stays_invalid_fails_the_job_invalid_output(stack: RunningStack) -> None:
    token = stack.token(unique("extract-invalid"))
    text = f"Acme {unique('invoice')} always garbled. [[fault:invalid_json*9]]"

    document = _run(stack, token, text)

    assert document["status"] == "Failed"
    assert document["error"]["code"] == "invalid_output"
    assert document["usage"]["outputTokens"] > 0  # both refused answers were paid for and counted
    assert_problem(
        stack.call("GET", f"/v1/jobs/{document['jobId']}/result", token=token), 409, "job_not_succeeded"
    )


def test_a_schema_outside_the_subset_is_400_and_writes_nothing(stack: RunningStack) -> None:
    # Given a schema whose nested object lets other properties in
    token = stack.token(unique("extract-bad-schema"))
    loose = {**INVOICE, "properties": {**INVOICE["properties"], "lines": {"type": "array", "items": {
        "type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}}}}  # fmt: skip
    key = new_key()

    # When it is submitted
    refused = stack.submit(token, _extract("Acme.", loose), key=key)

    # Then 400 invalid_schema names where, and nothing was written: no job is listed, and the same
    # Idempotency-Key still takes a valid request (a claim written for it would answer 409)
    problem = assert_problem(refused, 400, "invalid_schema")
    assert "/properties/lines/items/additionalProperties" in problem["detail"]
    assert stack.call("GET", "/v1/jobs", token=token).body["items"] == []
    accepted = stack.submit(token, _extract("Acme."), key=key)
    assert accepted.status == 202
    assert "idempotent-replayed" not in accepted.headers


def test_options_schema_on_another_operation_is_400(stack: RunningStack) -> None:
    token = stack.token(unique("extract-wrong-op"))

    refused = stack.submit(token, {**_extract("Acme."), "operation": "summarize"})
    missing = stack.submit(token, {"operation": "extract", "input": {"text": "Acme."}})

    assert [p["reason"] for p in assert_problem(refused, 400, "invalid_request")["invalidParams"]] == [
        "schema_not_allowed"
    ]
    assert [p["reason"] for p in assert_problem(missing, 400, "invalid_request")["invalidParams"]] == [
        "schema_required"
    ]
    assert stack.call("GET", "/v1/jobs", token=token).body["items"] == []


def test_a_streamed_extract_job_streams_its_json_which_parses_to_the_result(stack: RunningStack) -> None:
    # Given an extract job with stream: true whose first answer breaks the schema
    token = stack.token(unique("extract-stream"))
    text = f"Acme {unique('invoice')} streamed. [[fault:invalid_json*1]]"
    answer = stack.submit(token, {**_extract(text), "options": {"schema": INVOICE, "stream": True}})
    assert answer.status == 202, answer.raw

    document = stack.wait_terminal(answer.body["jobId"], token, timeout_seconds=120)

    # Then the streamed text of the result's attempt is the JSON document as generated, and it
    # parses to the result; the broken first answer streamed as attempt 1, the re-ask as attempt 2
    assert document["stream"] is True
    output = _result(stack, token, document)
    page = output_events(stack, token, document["jobId"])
    assert page["resultAttempt"] == 2
    assert json.loads(joined_attempt(page["events"], 2)) == output
    assert "unexpected_property" in json.loads(joined_attempt(page["events"], 1))
