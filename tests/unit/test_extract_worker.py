"""extract in the worker (DESIGN.md, "Structured extraction"): every answer is validated before it
is kept; an invalid one is asked again once within the claim, then the job fails invalid_output;
a cut one fails output_truncated; a refusal fails content_policy; usage of every call is counted
once, whatever ends the claim."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx2
import pytest

from functions.worker.provider import OpenAIChatProvider
from shared.contract import Operation
from shared.errors import TerminalProviderError, TransientProviderError
from shared.extraction.nullable import nullable_variant
from shared.job import JobInput, JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.plan_parameters import PlanParameters
from shared.planner import plan_job
from shared.ports import Completion, CompletionRequest, ResponseSchema, StreamControl, TextSink
from shared.tiers import Tier
from tests.fakes import job_record
from tests.support.providers import in_memory_provider
from tests.support.worker_world import USAGE, World, handed_back

INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {"vendor": {"type": "string"}, "total": {"type": "number"}},
    "required": ["vendor", "total"],
    "additionalProperties": False,
}
VALID = '{"vendor": "Acme", "total": 12.5}'
PLAN = PlanParameters(chunk_tokens=1000, step_output_tokens=200)
LONG_TEXT = "\n\n".join(f"Part {n}: " + "Acme billed the tools as agreed. " * 120 for n in range(1, 7))


def usage_of(calls: int) -> Usage:
    return Usage(input_tokens=calls * USAGE.input_tokens, output_tokens=calls * USAGE.output_tokens)


class ScriptedModel:
    """Answers each structured call with the next scripted answer ("valid", "invalid", "cut",
    "busy"), then valid ones; `wrong_for` makes every call whose messages hold it answer invalid."""

    def __init__(self, *script: str, wrong_for: str | None = None) -> None:
        self.script = list(script)
        self.wrong_for = wrong_for
        self.calls: list[CompletionRequest] = []

    def complete(self, request: CompletionRequest) -> Completion:
        self.calls.append(request)
        kind = self.script.pop(0) if self.script else "valid"
        if self.wrong_for is not None and self.wrong_for in request.messages[-1]["content"]:
            kind = "invalid"
        if kind == "busy":
            raise TransientProviderError("busy")
        if kind == "invalid":
            return Completion(text='{"vendor": "Acme"}', usage=USAGE)  # "total" is missing
        return Completion(text=VALID, usage=USAGE, truncated=kind == "cut")


@pytest.fixture
def extract_world(make_world: Callable[..., World]) -> Callable[..., World]:
    def make(model: Any, **settings: str) -> World:
        return make_world(provider=model, **{"PROVIDER_TIMEOUT_SECONDS": "10", **settings})

    return make


def extract_job(world: World, text: str = "Acme sent an invoice for 12.50 EUR.", **fields: Any) -> JobRecord:
    plan = plan_job(text, Operation.EXTRACT, PLAN, prompt_version="extract-v1", schema=INVOICE)
    job = job_record(
        world.clock.now(), operation=Operation.EXTRACT, plan=PLAN, total_steps=plan.total_steps, **fields
    )
    world.repository.create_job(job, job.dispatch_at + timedelta(minutes=15))
    world.payloads.put_input(
        JobInput(job_id=job.job_id, text=text, output_schema=INVOICE), "item", job.expires_at
    )
    return job


def result_of(world: World, job: JobRecord) -> Any:
    current = world.current(job)
    assert current.result_location is not None
    stored = current.inline_result() or world.payloads.get_result(job.job_id, current.result_location)
    assert stored is not None
    return json.loads(stored.output)


# --- one step ------------------------------------------------------------------------------------


def test_a_valid_answer_is_the_result_and_the_call_asked_for_the_schema_strictly(
    extract_world: Callable[..., World],
) -> None:
    model = ScriptedModel("valid")
    world = extract_world(model)
    job = extract_job(world)

    world.deliver(job)

    done = world.current(job)
    assert (done.status, done.usage) == (JobStatus.SUCCEEDED, USAGE)
    assert result_of(world, job) == {"vendor": "Acme", "total": 12.5}
    [call] = model.calls
    assert call.response_schema == ResponseSchema("extraction", INVOICE)


def test_an_invalid_answer_is_asked_again_once_and_both_calls_are_counted(
    extract_world: Callable[..., World],
) -> None:
    model = ScriptedModel("invalid", "valid")
    world = extract_world(model)
    job = extract_job(world)

    world.deliver(job)

    done = world.current(job)
    assert (done.status, done.usage, done.attempts) == (JobStatus.SUCCEEDED, usage_of(2), 1)
    assert len(model.calls) == 2
    assert model.calls[0] == model.calls[1]
    # The stored result carries both calls' tokens: a later claim adopting it counts them once
    stored = world.current(job).inline_result() or world.payloads.get_result(job.job_id, "item")
    assert stored is not None
    assert stored.usage == usage_of(2)


def test_a_second_invalid_answer_fails_the_job_invalid_output_with_both_calls_counted(
    extract_world: Callable[..., World],
) -> None:
    model = ScriptedModel("invalid", "invalid")
    world = extract_world(model)
    job = extract_job(world)

    world.deliver(job)

    failed = world.current(job)
    assert failed.status is JobStatus.FAILED
    assert failed.error is not None
    assert failed.error.code == "invalid_output"
    assert failed.usage == usage_of(2)
    assert len(model.calls) == 2


def test_an_answer_cut_by_its_token_limit_fails_output_truncated_without_asking_again(
    extract_world: Callable[..., World],
) -> None:
    model = ScriptedModel("cut")
    world = extract_world(model)
    job = extract_job(world)

    world.deliver(job)

    failed = world.current(job)
    assert failed.error is not None
    assert (failed.status, failed.error.code, failed.usage) == (JobStatus.FAILED, "output_truncated", USAGE)
    assert len(model.calls) == 1


def test_a_transient_failure_of_the_second_ask_keeps_the_first_calls_tokens(
    extract_world: Callable[..., World],
) -> None:
    # Given a first answer that breaks the schema, and a provider busy at the second ask
    model = ScriptedModel("invalid", "busy", "valid")
    world = extract_world(model)
    job = extract_job(world)

    # When the claim hands the job back
    world.deliver(job)

    # Then the refused answer's tokens are on the job already
    pending = handed_back(world, job)
    assert pending.usage == USAGE

    # And the next claim's answer adds its own, nothing twice
    world.clock.advance(timedelta(minutes=5))
    world.deliver(job)
    done = world.current(job)
    assert (done.status, done.usage) == (JobStatus.SUCCEEDED, usage_of(2))


def test_no_second_ask_starts_that_the_deadline_would_abandon(extract_world: Callable[..., World]) -> None:
    # Given an invocation with less time left than a call may take once the first answer is in
    model = ScriptedModel("invalid", "valid")
    world = extract_world(model, PROVIDER_TIMEOUT_SECONDS="100")
    job = extract_job(world)

    world.deliver(job)

    # Then the job is released with the refused answer's tokens, and no second call was made
    pending = handed_back(world, job)
    assert (pending.usage, len(model.calls)) == (USAGE, 1)


# --- steps ---------------------------------------------------------------------------------------


def test_a_long_text_extracts_each_part_under_the_nullable_variant_and_merges_under_the_schema(
    extract_world: Callable[..., World],
) -> None:
    model = ScriptedModel()
    world = extract_world(model, STEP_CONCURRENCY="1")
    job = extract_job(world, LONG_TEXT)

    world.deliver(job)

    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert done.total_steps == len(model.calls) > 2
    assert result_of(world, job) == {"vendor": "Acme", "total": 12.5}
    assert model.calls[-1].response_schema == ResponseSchema("extraction", INVOICE)
    partial = ResponseSchema("partial_extraction", nullable_variant(INVOICE))
    assert [call.response_schema for call in model.calls[:-1]] == [partial] * (len(model.calls) - 1)


def test_a_step_whose_answer_breaks_the_schema_is_asked_again_before_it_is_checkpointed(
    extract_world: Callable[..., World],
) -> None:
    model = ScriptedModel("valid", "invalid")  # the second call (part 2) answers invalid once
    world = extract_world(model, STEP_CONCURRENCY="1")
    job = extract_job(world, LONG_TEXT)

    world.deliver(job)

    done = world.current(job)
    assert done.status is JobStatus.SUCCEEDED
    assert len(model.calls) == done.total_steps + 1
    assert model.calls[1] == model.calls[2]
    assert done.usage == usage_of(done.total_steps + 1)
    # Every checkpoint holds a valid answer
    checkpoints = world.steps.get_steps(job.job_id, world.clock.now())
    assert {json.loads(output.output)["total"] for output in checkpoints.values()} == {12.5}


def test_a_step_that_breaks_the_schema_twice_fails_the_job_invalid_output(
    extract_world: Callable[..., World],
) -> None:
    model = ScriptedModel(wrong_for="Part 3:")
    world = extract_world(model, STEP_CONCURRENCY="1")
    job = extract_job(world, LONG_TEXT)

    world.deliver(job)

    failed = world.current(job)
    assert failed.status is JobStatus.FAILED
    assert failed.error is not None
    assert failed.error.code == "invalid_output"
    # Every call was paid for and is counted: the checkpointed parts and both refused answers
    assert failed.usage == usage_of(len(model.calls))
    part_three = [call for call in model.calls if "Part 3:" in call.messages[-1]["content"]]
    assert len(part_three) == 2


# --- the provider --------------------------------------------------------------------------------


def provider_answering(body: dict[str, Any], seen: list[dict[str, Any]]) -> OpenAIChatProvider:
    """The real provider over the real SDK, its transport in memory, recording each request body."""

    def transport(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        return httpx2.Response(200, json=body)

    return in_memory_provider(transport)


def completion_body(
    content: str | None, finish_reason: str = "stop", refusal: str | None = None
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "finish_reason": finish_reason,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


STRUCTURED = CompletionRequest(
    model="gpt-4o-mini",
    messages=[{"role": "user", "content": "Acme"}],
    max_output_tokens=50,
    response_schema=ResponseSchema("extraction", INVOICE),
)


@pytest.fixture
def seen() -> list[dict[str, Any]]:
    return []


def test_a_structured_call_sends_a_strict_json_schema_response_format(seen: list[dict[str, Any]]) -> None:
    completion = provider_answering(completion_body(VALID), seen).complete(STRUCTURED)

    assert seen[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "extraction", "schema": INVOICE, "strict": True},
    }
    assert (completion.text, completion.truncated) == (VALID, False)


def test_an_answer_stopped_by_max_tokens_is_marked_truncated(seen: list[dict[str, Any]]) -> None:
    completion = provider_answering(completion_body('{"vendor": "Ac', "length"), seen).complete(STRUCTURED)

    assert completion.truncated is True


def test_a_refusal_fails_content_policy_with_its_usage(seen: list[dict[str, Any]]) -> None:
    provider = provider_answering(completion_body(None, refusal="I can't help with that."), seen)

    with pytest.raises(TerminalProviderError) as raised:
        provider.complete(STRUCTURED)

    assert raised.value.job_code == "content_policy"
    assert raised.value.usage == Usage(input_tokens=12, output_tokens=3, tiers=frozenset({Tier.STANDARD}))


def test_a_call_without_a_schema_sends_no_response_format(seen: list[dict[str, Any]]) -> None:
    plain = CompletionRequest(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}], max_output_tokens=5
    )

    provider_answering(completion_body("text"), seen).complete(plain)

    assert "response_format" not in seen[0]


# --- streamed ------------------------------------------------------------------------------------


class StreamingJson:
    """Streams a JSON answer in pieces: the first `broken` streams miss a required property."""

    def __init__(self, broken: int = 0) -> None:
        self.broken = broken
        self.streams: list[CompletionRequest] = []

    def complete(self, request: CompletionRequest) -> Completion:
        raise AssertionError("a streaming job's one call is streamed")

    def stream(self, request: CompletionRequest, on_text: TextSink, control: StreamControl) -> Completion:
        self.streams.append(request)
        text = '{"vendor": "Acme"}' if len(self.streams) <= self.broken else VALID
        pieces = [text[: len(text) // 2], text[len(text) // 2 :]]
        for piece in pieces:
            on_text(piece)
        return Completion(text=text, usage=USAGE)


def test_a_streamed_extract_answer_is_checked_whole_and_an_invalid_one_streams_again_as_the_next_attempt(
    extract_world: Callable[..., World],
) -> None:
    model = StreamingJson(broken=1)
    world = extract_world(model)
    job = extract_job(world, stream=True)

    world.deliver(job)

    done = world.current(job)
    assert (done.status, done.output_attempt, done.result_attempt) == (JobStatus.SUCCEEDED, 2, 2)
    assert done.usage == usage_of(2)
    assert [request.response_schema for request in model.streams] == [
        ResponseSchema("extraction", INVOICE)
    ] * 2
    # The result is the second attempt's text as it streamed, and it parses to the object
    streamed = "".join(event.text for event in world.events.of(job.job_id, 2))
    assert json.loads(streamed) == result_of(world, job) == {"vendor": "Acme", "total": 12.5}
