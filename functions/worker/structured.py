"""extract's calls: the answer checked against its schema before anyone may keep it.

DESIGN.md, "Structured extraction". A call with a response schema is one model call whose answer
is parsed and validated (shared.extraction.answers, through the SchemaValidator port) on the
model thread that made it (a streamed answer's once it is complete, on a model thread too), so the
event loop never waits for a validation. A valid answer is kept as it was generated: a step's
checkpoint and a job's result hold that text, which for a streamed answer is what its events
joined to. An answer cut by its token limit fails the job `output_truncated` (asking again would
cut it again); an answer that is not JSON or breaks the schema raises InvalidAnswerError, which the
caller asks again once within its claim (`INVALID_OUTPUT` once the second is invalid too).
"""

from __future__ import annotations

from shared.errors import InvalidAnswerError, TerminalProviderError
from shared.extraction.answers import AnswerVerdict, SchemaValidator, check_answer
from shared.planner import Step, StepPlan, step_schema
from shared.ports import Completion, CompletionRequest, ModelProvider, ResponseSchema

INVALID_OUTPUT = "invalid_output"
OUTPUT_TRUNCATED = "output_truncated"


def checked_answer(
    provider: ModelProvider, validator: SchemaValidator, request: CompletionRequest
) -> Completion:
    """One call; with a response schema, its answer checked (`checked`)."""
    return checked(provider.complete(request), request, validator)


def checked(completion: Completion, request: CompletionRequest, validator: SchemaValidator) -> Completion:
    """A call's answer, returned as it is once it proved valid against the request's schema (none:
    nothing to check). Kept as generated, not re-serialized: a streamed answer's result is the text
    its events hold."""
    if request.response_schema is None:
        return completion
    verdict = check_answer(
        completion.text, request.response_schema.schema, validator, cut_by_limit=completion.truncated
    )
    if verdict.verdict is AnswerVerdict.TRUNCATED:
        raise TerminalProviderError(
            OUTPUT_TRUNCATED, "The answer was cut by its token limit.", usage=completion.usage
        )
    if verdict.verdict is AnswerVerdict.INVALID:
        raise InvalidAnswerError(
            "The answer does not match the schema.", usage=completion.usage, problem=verdict.problem or ""
        )
    return completion


def invalid_output(usage: object | None = None) -> TerminalProviderError:
    """The terminal failure of a call whose answer broke its schema twice in one claim."""
    return TerminalProviderError(INVALID_OUTPUT, "The answer did not match the schema twice.", usage=usage)


def response_schema(plan: StepPlan, step: Step) -> ResponseSchema | None:
    """The structured-output format of a step's call: None but for extract (shared.planner's
    `step_schema`: the job's schema for the result, its nullable variant for the parts)."""
    schema = step_schema(plan, step)
    if schema is None:
        return None
    return ResponseSchema("extraction" if step == plan.final_step else "partial_extraction", schema)
