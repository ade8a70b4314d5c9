"""Structured answers against the local model server: the worker's provider (the real openai SDK,
a real socket) sends a strict `json_schema` response format, and the worker's check of the answer
(functions.worker.structured) takes what the fake model writes, called or streamed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from pydantic import BaseModel, ConfigDict

from functions.worker.structured import OUTPUT_TRUNCATED, checked, checked_answer
from outlast.local.model_server import ModelServer
from shared.adapters.json_schema import JsonSchemaValidator
from shared.contract import Operation
from shared.errors import InvalidAnswerError, TerminalProviderError
from shared.ports import CompletionRequest, ResponseSchema, StreamControl
from shared.prompts import template_for
from tests.integration.test_model_server import control
from tests.integration.test_model_server_streaming import provider_for

pytestmark = pytest.mark.integration

MODEL = "gpt-4o-mini"
VALIDATOR = JsonSchemaValidator()
INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {"vendor": {"type": "string"}, "total": {"type": "number"}, "paid": {"type": "boolean"}},
    "required": ["vendor", "total", "paid"],
    "additionalProperties": False,
}


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def request(text: str, max_tokens: int = 4096) -> CompletionRequest:
    return CompletionRequest(
        model=MODEL,
        messages=template_for(Operation.EXTRACT).render(text),
        max_output_tokens=max_tokens,
        response_schema=ResponseSchema("extraction", INVOICE),
    )


def test_a_structured_call_answers_json_that_matches_its_schema(server: ModelServer) -> None:
    completion = checked_answer(provider_for(server), VALIDATOR, request("Acme invoiced tools."))

    assert json.loads(completion.text)["vendor"] == "Acme"
    assert VALIDATOR.first_problem(json.loads(completion.text), INVOICE) is None
    assert completion.truncated is False
    assert completion.usage is not None


def test_invalid_json_is_an_invalid_answer_once_then_a_valid_one(server: ModelServer) -> None:
    provider = provider_for(server)
    asked = request("Acme invoiced tools. [[fault:invalid_json*1]]")

    with pytest.raises(InvalidAnswerError) as invalid:
        checked_answer(provider, VALIDATOR, asked)
    again = checked_answer(provider, VALIDATOR, asked)

    assert invalid.value.problem == ""  # the extra property: reported at the root
    assert invalid.value.usage is not None
    assert VALIDATOR.first_problem(json.loads(again.text), INVOICE) is None
    assert [call["outcome"] for call in control(server, "GET", "/_calls")] == ["invalid_json", "ok"]


def test_an_answer_cut_by_max_tokens_fails_output_truncated(server: ModelServer) -> None:
    with pytest.raises(TerminalProviderError) as cut:
        checked_answer(provider_for(server), VALIDATOR, request("Acme invoiced tools.", max_tokens=3))

    assert cut.value.job_code == OUTPUT_TRUNCATED
    assert cut.value.usage is not None


def test_a_streamed_structured_answer_is_the_json_as_generated(server: ModelServer) -> None:
    pieces: list[str] = []
    asked = request("Acme streamed an invoice.")

    streamed = checked(provider_for(server).stream(asked, pieces.append, StreamControl()), asked, VALIDATOR)

    assert len(pieces) > 3
    assert "".join(pieces).strip() == streamed.text
    assert json.loads(streamed.text)["vendor"] == "Acme"


def test_the_sdks_own_parse_helper_reads_the_answer(server: ModelServer) -> None:
    # The SDK turns a pydantic model into a strict json_schema format and parses the answer into it:
    # the local server answers what OpenAI would for it
    class Invoice(BaseModel):
        model_config = ConfigDict(extra="forbid")
        vendor: str
        total: float
        paid: bool

    client = openai.OpenAI(base_url=server.url, api_key="local", max_retries=0, timeout=10)
    parsed = client.chat.completions.parse(
        model=MODEL,
        messages=template_for(Operation.EXTRACT).render("Acme invoiced tools."),  # type: ignore[arg-type]
        response_format=Invoice,
    )

    invoice = parsed.choices[0].message.parsed
    assert invoice is not None
    assert invoice.vendor == "Acme"
