"""The step planner: a long input becomes map steps over chunks and reduce steps over their outputs.

Pure domain code (DESIGN.md, "Long inputs: jobs in checkpointed steps"): text and plan
parameters in, a plan out; no I/O. Submit plans once and stores the `PlanParameters`; every
worker plans again from the stored parameters and the stored input, and gets the same plan, so
a deploy that changes a setting never re-plans an accepted job.

Tokens are estimated, never counted: `estimate_tokens(text) = ceil(UTF-8 bytes / 4)`. Budgets
below are in estimated tokens, and a chunk fits a budget of T tokens exactly when its UTF-8
encoding is at most 4 T bytes.

- Chunk budget: `chunk_tokens` minus the map prompt's overhead (the estimate of the map
  template's own text: system prompt, user template and, for classify, the label list, with
  the chunk left out), so a map call's message text stays within `chunk_tokens`. When the
  overhead would leave less than half of `chunk_tokens` (a classify job with 50 long labels
  and a small `chunk_tokens`), the chunk keeps half: such a map call runs over `chunk_tokens`
  by the labels' excess, which is a planning size far below any model's context.
- Chunking: the text is cut after paragraph breaks (a blank line), the pieces still too large
  after sentence ends, then after whitespace, and a piece still too large (text without spaces)
  between code points. The pieces are then packed greedily, in order, into chunks. Whitespace
  stays with the piece before it, so the chunks join back to the input exactly. A code-point
  cut may separate the parts of a grapheme cluster (an accent from its letter); it never splits
  a UTF-8 sequence.
- One chunk: one step, rendered with the job's operation template, exactly today's single call.
- Several chunks: one map step per chunk; then, for summarize and analyze, reduce levels: the
  outputs of a level are combined in groups of at least 2 and at most `reduce_group_size` (the
  most children whose worst case, `step_output_tokens` each plus the reduce prompt's overhead,
  fits `chunk_tokens`), the groups balanced in size, until one output remains. An odd output
  out (only possible with groups of 2) rides up to the next level unreduced. `classify` has no
  reduce call: its result is the vote of the map answers (`vote`).
- `max_tokens`: `step_output_tokens` for every step but the final one, which gets the job's
  `maxOutputTokens`, or `MAX_OUTPUT_TOKENS` (the most a caller may ask for) when it has none:
  every call is capped, so `token_bound` is a bound on what a job can cost.
- Step ids are stable and unique within a plan: `s0000` (the one step of a one-step job),
  `m0003` (the map step of chunk 3, counted from 0), `r1-0000` (the first reduce of level 1).
- `extract` (DESIGN.md, "Structured extraction") plans like summarize, and every call answers
  under a schema (`step_schema`): the final step under the job's own, every other step under its
  nullable variant, so a part that does not state a field can say null instead of inventing it.
  Its `step_output_tokens` is the stage's extract setting, stored on the job like the others'.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.contract import MAX_OUTPUT_TOKENS, Operation
from shared.extraction.nullable import nullable_variant
from shared.extraction.schema_subset import schema_bytes
from shared.job import JobInput, JobRecord, Usage
from shared.plan_parameters import PlanParameters
from shared.prompts import PromptTemplate, template_for_version, template_named

BYTES_PER_TOKEN = 4  # the estimate's rule of thumb

# For budgets (DESIGN.md, "Token budgets"). OpenAI's own counting adds 3 tokens per message and 3
# to prime the reply; 8 per message covers both for any call of at least one message.
MESSAGE_OVERHEAD_TOKENS = 8
# A child output was at most `step_output_tokens` tokens as the model generated it. Read back by
# the same tokenizer it takes about as many; a model can emit a tokenization the encoder would
# not choose, so the bound allows twice as many. This factor is the one part of the bound that is
# an assumption rather than arithmetic: bounding the child's bytes instead would multiply by the
# longest token in the vocabulary (dozens of bytes for runs of spaces or dashes) and reserve many
# times what a reduce ever reads. Reviewed when budgets began to reserve `token_bound`: kept. A
# reasoning model's completion tokens include reasoning that never reaches the text, which only
# widens the margin; and the factor can cost a tenant nothing it did not spend, since settlement
# counts the usage the provider reported. A run that used more than it reserved is counted in full
# and reported (the BudgetOverruns metric), so a wrong factor shows as an alarm, not as lost tokens.
REREAD_TOKENS_PER_OUTPUT_TOKEN = 2
# An extract call whose answer breaks its schema is asked once more within the claim (DESIGN.md,
# "Structured extraction"), so the bound counts every structured call twice.
ASKS_PER_STRUCTURED_CALL = 2

# Placeholders as wide as any real part number, so the map overhead does not depend on the
# number of chunks it helps decide.
_WIDEST_PART = 999_999

_PARAGRAPH_END = re.compile(r"\n\s*\n\s*")
# Western sentence ends need the whitespace after them ("3.5" is no end); CJK ones are followed
# by none.
_SENTENCE_END = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*\s+|[\u3002\uff01\uff1f]+\s*")
_WORD_END = re.compile(r"\s+")
_BOUNDARIES = (_PARAGRAPH_END, _SENTENCE_END, _WORD_END)


@dataclass(frozen=True)
class _Recipe:
    """The prompt versions of one plan version; a new plan version may name new ones."""

    map_versions: Mapping[Operation, str]
    reduce_versions: Mapping[Operation, str]


# Every plan version ever shipped stays here, like the prompt versions it names.
_RECIPES: dict[str, _Recipe] = {
    "plan-v1": _Recipe(
        # extract joined plan-v1 with its prompts: no job of another operation plans differently.
        map_versions={
            Operation.SUMMARIZE: "summarize-map-v1",
            Operation.ANALYZE: "analyze-map-v1",
            Operation.CLASSIFY: "classify-map-v1",
            Operation.EXTRACT: "extract-map-v1",
        },
        reduce_versions={
            Operation.SUMMARIZE: "summarize-reduce-v1",
            Operation.ANALYZE: "analyze-reduce-v1",
            Operation.EXTRACT: "extract-reduce-v1",
        },
    ),
    # Prompt caching (DESIGN.md, "Cost tiers"): map templates with the fixed instruction before
    # the part number; the reduces already put their fixed instruction first.
    "plan-v2": _Recipe(
        map_versions={
            Operation.SUMMARIZE: "summarize-map-v2",
            Operation.ANALYZE: "analyze-map-v2",
            Operation.CLASSIFY: "classify-map-v2",
            Operation.EXTRACT: "extract-map-v1",
        },
        reduce_versions={
            Operation.SUMMARIZE: "summarize-reduce-v1",
            Operation.ANALYZE: "analyze-reduce-v1",
            Operation.EXTRACT: "extract-reduce-v1",
        },
    ),
}


class StepKind(StrEnum):
    """A step's kind: the whole input in one call, one chunk, or combining outputs."""

    SINGLE = "single"
    MAP = "map"
    REDUCE = "reduce"


class Reduction(StrEnum):
    """How a plan's result comes out of its steps."""

    NONE = "none"  # one step: its output is the result
    MODEL = "model"  # the final reduce step's output is the result
    VOTE = "vote"  # classify: the label most map steps chose


@dataclass(frozen=True)
class Step:
    """One model call of a plan.

    `chunk` is the chunk index of a single or map step (None for a reduce); `inputs` are the
    ids of the steps whose outputs a reduce combines, in order (empty otherwise).
    """

    step_id: str
    kind: StepKind
    level: int
    chunk: int | None
    inputs: tuple[str, ...]
    max_tokens: int


@dataclass(frozen=True)
class StepPlan:
    """Every model call a job makes, in an order that runs each step after its inputs.

    `schema` is extract's JSON Schema (None for the other operations): see `step_schema`.
    """

    operation: Operation
    parameters: PlanParameters
    prompt_version: str
    labels: tuple[str, ...] | None
    chunks: tuple[str, ...]
    steps: tuple[Step, ...]
    reduction: Reduction
    schema: Mapping[str, Any] | None = None

    @property
    def total_steps(self) -> int:
        """The number of model calls the plan makes when nothing fails (`progress.totalSteps`)."""
        return len(self.steps)

    @property
    def final_step(self) -> Step | None:
        """The step whose output is the result; None when the result is a vote."""
        return None if self.reduction is Reduction.VOTE else self.steps[-1]

    @property
    def map_steps(self) -> tuple[Step, ...]:
        """The single or map steps, in chunk order."""
        return tuple(step for step in self.steps if step.kind is not StepKind.REDUCE)

    def step(self, step_id: str) -> Step:
        """The step with this id; KeyError when the plan has none."""
        for step in self.steps:
            if step.step_id == step_id:
                return step
        raise KeyError(step_id)


@dataclass(frozen=True)
class Vote:
    """The outcome of a classify vote: the label, each label's votes, and the answers that were no label."""

    label: str
    counts: tuple[int, ...]
    ignored: int


# --- estimates and chunks -------------------------------------------------------------------


def estimate_tokens(text: str) -> int:
    """ceil(UTF-8 bytes / 4): the estimate every budget in the plan is counted in."""
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)


def estimate_call_usage(messages: Sequence[Mapping[str, str]], output: str) -> Usage:
    """A call's usage by the estimate, flagged as such: what a streamed call that ended without the
    provider's usage report (cut, canceled) is counted at (DESIGN.md, "Streaming output")."""
    return Usage(
        input_tokens=estimate_tokens("".join(m.get("content", "") for m in messages)),
        output_tokens=estimate_tokens(output),
        estimated=True,
    )


def chunk_text(text: str, budget_tokens: int) -> list[str]:
    """Deterministic chunks of at most `budget_tokens` estimated tokens each that join back to `text`."""
    if budget_tokens < 1:
        raise ValueError(f"a chunk budget must be at least 1 token, not {budget_tokens}")
    limit = budget_tokens * BYTES_PER_TOKEN
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for piece, piece_bytes in _pieces(text, limit, 0):
        if current and size + piece_bytes > limit:
            chunks.append("".join(current))
            current, size = [], 0
        current.append(piece)
        size += piece_bytes
    if current:
        chunks.append("".join(current))
    return chunks


def _pieces(text: str, limit: int, level: int) -> Iterator[tuple[str, int]]:
    """The text cut at the coarsest boundaries that make each piece fit, with each piece's bytes."""
    size = len(text.encode("utf-8"))
    if size <= limit:
        if text:
            yield text, size
        return
    if level == len(_BOUNDARIES):
        yield from _code_point_pieces(text, limit)
        return
    for piece in _split_after(text, _BOUNDARIES[level]):
        yield from _pieces(piece, limit, level + 1)


def _split_after(text: str, boundary: re.Pattern[str]) -> Iterator[str]:
    """The text cut right after each match of the boundary (which stays with the piece before it)."""
    start = 0
    for match in boundary.finditer(text):
        if match.end() > start:
            yield text[start : match.end()]
            start = match.end()
    if start < len(text):
        yield text[start:]


def _code_point_pieces(text: str, limit: int) -> Iterator[tuple[str, int]]:
    """Pieces of at most `limit` bytes, each as long as it can be, cut between code points."""
    encoded = text.encode("utf-8")
    start = 0
    while start < len(encoded):
        end = min(start + limit, len(encoded))
        # Back off to the start of a code point: continuation bytes are 0b10xxxxxx.
        while end < len(encoded) and encoded[end] & 0xC0 == 0x80:
            end -= 1
        yield encoded[start:end].decode("utf-8"), end - start
        start = end


# --- prompts and overheads ------------------------------------------------------------------


def _recipe(plan_version: str) -> _Recipe:
    recipe = _RECIPES.get(plan_version)
    if recipe is None:
        raise ValueError(f"unknown plan version {plan_version!r}; known: {', '.join(sorted(_RECIPES))}")
    return recipe


def map_template(operation: Operation, plan_version: str) -> PromptTemplate:
    """The map template a plan version names for an operation."""
    return template_named(_recipe(plan_version).map_versions[operation])


def reduce_template(operation: Operation, plan_version: str) -> PromptTemplate | None:
    """The reduce template a plan version names; None for classify, which votes."""
    version = _recipe(plan_version).reduce_versions.get(operation)
    return template_named(version) if version is not None else None


def _text_bytes(messages: Sequence[Mapping[str, str]]) -> int:
    return sum(len(message["content"].encode("utf-8")) for message in messages)


def map_overhead_tokens(
    operation: Operation, plan_version: str, labels: tuple[str, ...] | None = None
) -> int:
    """The estimate of a map call's own text, without its chunk."""
    messages = map_template(operation, plan_version).render("", labels, part=_WIDEST_PART, parts=_WIDEST_PART)
    return math.ceil(_text_bytes(messages) / BYTES_PER_TOKEN)


def reduce_overhead_tokens(operation: Operation, plan_version: str, children: int) -> int:
    """The estimate of a reduce call's own text for this many children, without their outputs."""
    template = reduce_template(operation, plan_version)
    if template is None:
        raise ValueError(f"{operation.value} has no reduce prompt: it is reduced by vote")
    return math.ceil(_text_bytes(template.render_parts([""] * children)) / BYTES_PER_TOKEN)


def chunk_budget_tokens(
    operation: Operation, parameters: PlanParameters, labels: tuple[str, ...] | None = None
) -> int:
    """The most estimated tokens of input one chunk holds: `chunk_tokens` less the map prompt's overhead."""
    overhead = map_overhead_tokens(operation, parameters.plan_version, labels)
    return max(parameters.chunk_tokens - overhead, parameters.chunk_tokens // 2, 1)


def _reduce_fits(operation: Operation, parameters: PlanParameters, children: int) -> bool:
    worst_case = children * parameters.step_output_tokens
    return worst_case + reduce_overhead_tokens(operation, parameters.plan_version, children) <= (
        parameters.chunk_tokens
    )


def check_plan_parameters(parameters: PlanParameters, operations: Iterable[Operation] | None = None) -> None:
    """Raise ValueError unless chunk_tokens >= 2 x step_output_tokens + the reduce prompt's overhead,
    for each of `operations` that reduces by a model call (default: every one of the plan version)."""
    recipe = _recipe(parameters.plan_version)
    for operation in recipe.reduce_versions if operations is None else operations:
        if operation not in recipe.reduce_versions:
            continue
        if not _reduce_fits(operation, parameters, 2):
            overhead = reduce_overhead_tokens(operation, parameters.plan_version, 2)
            needed = 2 * parameters.step_output_tokens + overhead
            raise ValueError(
                f"chunkTokens {parameters.chunk_tokens} is too small for stepOutputTokens "
                f"{parameters.step_output_tokens}: a {operation.value} reduce of 2 outputs needs "
                f"2 x {parameters.step_output_tokens} + {overhead} (prompt overhead) = {needed} tokens"
            )


def reduce_group_size(operation: Operation, parameters: PlanParameters, limit: int) -> int:
    """The most outputs one reduce combines (at least 2, at most `limit`) within `chunk_tokens`."""
    check_plan_parameters(parameters, (operation,))
    size = 2
    while size < limit and _reduce_fits(operation, parameters, size + 1):
        size += 1
    return size


# --- the plan -------------------------------------------------------------------------------


def plan_job(
    text: str,
    operation: Operation,
    parameters: PlanParameters,
    *,
    prompt_version: str,
    labels: tuple[str, ...] | None = None,
    max_output_tokens: int | None = None,
    schema: Mapping[str, Any] | None = None,
) -> StepPlan:
    """A job's plan: one step when the text fits one chunk, else map steps, then reduce levels or a vote.

    The final call's `max_tokens` is `max_output_tokens`, or `MAX_OUTPUT_TOKENS` when the job set none.
    `schema` is extract's (it shapes the answers, not the chunks: it is no part of the messages).
    """
    check_plan_parameters(parameters, (operation,))
    final_max_tokens = MAX_OUTPUT_TOKENS if max_output_tokens is None else max_output_tokens
    chunks = tuple(chunk_text(text, chunk_budget_tokens(operation, parameters, labels)))
    if len(chunks) <= 1:
        single = Step("s0000", StepKind.SINGLE, 0, 0, (), final_max_tokens)
        return StepPlan(
            operation, parameters, prompt_version, labels, (text,), (single,), Reduction.NONE, schema
        )
    sot = parameters.step_output_tokens
    maps = tuple(Step(f"m{index:04d}", StepKind.MAP, 0, index, (), sot) for index in range(len(chunks)))
    if operation is Operation.CLASSIFY:
        return StepPlan(operation, parameters, prompt_version, labels, chunks, maps, Reduction.VOTE)
    group_size = reduce_group_size(operation, parameters, len(maps))
    reduces = _reduce_levels([step.step_id for step in maps], group_size, sot, final_max_tokens)
    return StepPlan(
        operation, parameters, prompt_version, labels, chunks, maps + reduces, Reduction.MODEL, schema
    )


def plan_of(job: JobRecord, job_input: JobInput) -> StepPlan:
    """The plan of a stored job: its input, with the parameters and prompt version stored on it."""
    return plan_job(
        job_input.text,
        job.operation,
        job.plan,
        prompt_version=job.prompt_version,
        labels=job_input.labels,
        max_output_tokens=job_input.max_output_tokens,
        schema=job_input.output_schema,
    )


def _reduce_levels(
    outputs: list[str], group_size: int, step_output_tokens: int, final_max_tokens: int
) -> tuple[Step, ...]:
    steps: list[Step] = []
    level = 1
    while len(outputs) > 1:
        groups = _balanced_groups(outputs, group_size)
        final = len(groups) == 1
        next_outputs: list[str] = []
        made = 0
        for group in groups:
            if len(group) == 1:
                next_outputs.append(group[0])  # nothing to combine it with on this level
                continue
            step_id = f"r{level}-{made:04d}"
            made += 1
            max_tokens = final_max_tokens if final else step_output_tokens
            steps.append(Step(step_id, StepKind.REDUCE, level, None, tuple(group), max_tokens))
            next_outputs.append(step_id)
        outputs = next_outputs
        level += 1
    return tuple(steps)


def _balanced_groups(items: list[str], group_size: int) -> list[list[str]]:
    """As few groups of at most `group_size` as possible, sizes differing by at most one, in order."""
    count = math.ceil(len(items) / group_size)
    small, larger = divmod(len(items), count)
    groups: list[list[str]] = []
    start = 0
    for index in range(count):
        size = small + (1 if index < larger else 0)
        groups.append(items[start : start + size])
        start += size
    return groups


def step_schema(plan: StepPlan, step: Step) -> dict[str, Any] | None:
    """The schema a step answers under: None but for extract; the job's own for the step whose
    output is the result, its nullable variant for every other (a map step sees one part; a reduce
    that is not the last merges some of the parts, and may still not have found a field)."""
    if plan.schema is None:
        return None
    schema = dict(plan.schema)
    return schema if step == plan.final_step else nullable_variant(schema)


def ready_steps(plan: StepPlan, completed: Collection[str]) -> list[Step]:
    """The steps not yet completed whose inputs all are, in plan order: what may run now."""
    return [
        step
        for step in plan.steps
        if step.step_id not in completed and all(child in completed for child in step.inputs)
    ]


def step_messages(plan: StepPlan, step: Step, child_outputs: Sequence[str] = ()) -> list[dict[str, str]]:
    """A step's chat messages; a reduce takes its children's outputs in the order of `step.inputs`."""
    if step.kind is StepKind.REDUCE:
        if len(child_outputs) != len(step.inputs):
            raise ValueError(f"{step.step_id} combines {len(step.inputs)} outputs, not {len(child_outputs)}")
        template = reduce_template(plan.operation, plan.parameters.plan_version)
        if template is None:  # a plan of this operation has no reduce steps
            raise ValueError(f"{plan.operation.value} plans have no reduce steps")
        return template.render_parts(child_outputs)
    if child_outputs or step.chunk is None:
        raise ValueError(f"{step.step_id} reads a chunk, not outputs")
    text = plan.chunks[step.chunk]
    if step.kind is StepKind.SINGLE:
        return template_for_version(plan.operation, plan.prompt_version).render(text, plan.labels)
    template = map_template(plan.operation, plan.parameters.plan_version)
    return template.render(text, plan.labels, part=step.chunk + 1, parts=len(plan.chunks))


# --- results --------------------------------------------------------------------------------


def match_label(answer: str, labels: Sequence[str]) -> str | None:
    """The label an answer names, in the caller's spelling (case and a trailing period ignored); else None."""
    folded = answer.strip().strip(".").strip().casefold()
    for label in labels:
        if label.casefold() == folded:
            return label
    return None


def vote(answers: Sequence[str], labels: Sequence[str]) -> Vote:
    """The label most answers chose; ties go to the label listed first.

    An answer that names no label counts for nothing. When none names one, every label ties at
    zero votes and the tie rule picks the first label: a classify job always answers one of its
    labels, and `Vote.ignored` tells the caller how many answers were thrown away.
    """
    if not labels:
        raise ValueError("a vote needs at least one label")
    counts = dict.fromkeys(labels, 0)
    ignored = 0
    for answer in answers:
        label = match_label(answer, labels)
        if label is None:
            ignored += 1
        else:
            counts[label] += 1
    best = max(counts.values())
    winner = next(label for label in labels if counts[label] == best)
    return Vote(label=winner, counts=tuple(counts[label] for label in labels), ignored=ignored)


def final_output(plan: StepPlan, outputs: Mapping[str, str]) -> str:
    """The job's result once every step has an output: the final step's, or the vote's label."""
    if plan.reduction is Reduction.VOTE:
        return vote([outputs[step.step_id] for step in plan.map_steps], plan.labels or ()).label
    final = plan.steps[-1]
    return outputs[final.step_id]


def token_bound(plan: StepPlan) -> int:
    """An upper bound on the tokens (input + output) of every model call the plan makes.

    Per call: the UTF-8 bytes of its messages' text (a byte-level BPE token covers at least one
    byte), `MESSAGE_OVERHEAD_TOKENS` per message, and its `max_tokens` (every call has one). A
    reduce's children are counted at `step_output_tokens x REREAD_TOKENS_PER_OUTPUT_TOKEN` each,
    since their text is not known at submit. Each step is counted once: a job's usage sums the
    calls that report usage, which are one written call per step plus at most one terminal
    failure (a retried transient failure reports none, and a call whose output was never written
    is not in the sum).

    An extract call also sends its schema (`step_schema`), counted at its bytes, and may be asked
    twice: each of its calls counts `ASKS_PER_STRUCTURED_CALL` times.
    """
    child_bound = plan.parameters.step_output_tokens * REREAD_TOKENS_PER_OUTPUT_TOKEN
    total = 0
    for step in plan.steps:
        call = 0
        if step.kind is StepKind.REDUCE:
            messages = step_messages(plan, step, [""] * len(step.inputs))
            call += child_bound * len(step.inputs)
        else:
            messages = step_messages(plan, step)
        call += _text_bytes(messages) + MESSAGE_OVERHEAD_TOKENS * len(messages)
        call += step.max_tokens
        schema = step_schema(plan, step)
        if schema is not None:
            call = ASKS_PER_STRUCTURED_CALL * (call + schema_bytes(schema))
        total += call
    return total
