"""The step planner: chunks that join back to the input under budget, and the steps a job makes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from shared.contract import MAX_OUTPUT_TOKENS, Operation
from shared.plan_parameters import PlanParameters
from shared.planner import (
    MESSAGE_OVERHEAD_TOKENS,
    REREAD_TOKENS_PER_OUTPUT_TOKEN,
    Reduction,
    Step,
    StepKind,
    StepPlan,
    check_plan_parameters,
    chunk_budget_tokens,
    chunk_text,
    estimate_tokens,
    final_output,
    map_overhead_tokens,
    map_template,
    match_label,
    plan_job,
    ready_steps,
    reduce_group_size,
    reduce_overhead_tokens,
    reduce_template,
    step_messages,
    token_bound,
    vote,
)
from shared.prompts import template_for

LABELS = ("billing", "shipping", "technical")
# Spaces, line breaks, sentence ends, and characters of 1 to 4 UTF-8 bytes.
MIXED = st.text(alphabet=st.sampled_from(list("ab .!?\n\t\u00e9\u4e2d\U0001f600\u3002")), max_size=400)
# No whitespace at all: only the code-point fallback can cut it.
UNSPACED = st.text(alphabet=st.sampled_from(list("ab\u00e9\u4e2d\U0001f600")), min_size=1, max_size=400)
BUDGETS = st.integers(min_value=1, max_value=40)


def text_bytes(messages: list[dict[str, str]]) -> int:
    return sum(len(message["content"].encode()) for message in messages)


def plan_of(
    text: str,
    operation: Operation = Operation.SUMMARIZE,
    parameters: PlanParameters | None = None,
    labels: tuple[str, ...] | None = None,
    max_output_tokens: int | None = None,
) -> StepPlan:
    return plan_job(
        text,
        operation,
        parameters or PlanParameters(),
        prompt_version=template_for(operation).version,
        labels=labels,
        max_output_tokens=max_output_tokens,
    )


def paragraphs(count: int, operation: Operation, parameters: PlanParameters, labels=None) -> str:
    """`count` paragraphs that each fill one chunk exactly, so the text is `count` chunks."""
    limit = chunk_budget_tokens(operation, parameters, labels) * 4
    return "".join("x" * (limit - 2) + "\n\n" for _ in range(count))


def ids(steps: tuple[Step, ...] | list[Step]) -> list[str]:
    return [step.step_id for step in steps]


# --- estimates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("abcd", 1),
        ("abcde", 2),
        ("\u00e9\u00e9", 1),
        ("\u4e2d", 1),
        ("\U0001f600", 1),
        ("\U0001f600a", 2),
    ],
)
def test_the_estimate_is_utf8_bytes_over_four_rounded_up(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


# --- chunks -----------------------------------------------------------------------------------


@settings(max_examples=300)
@given(text=MIXED, budget=BUDGETS)
def test_chunks_join_back_fit_the_budget_and_are_greedy(text: str, budget: int) -> None:
    chunks = chunk_text(text, budget)

    assert "".join(chunks) == text
    assert all(chunk and estimate_tokens(chunk) <= budget for chunk in chunks)
    # Greedy packing: a chunk ends only where the next piece would not have fitted.
    assert all(estimate_tokens(a + b) > budget for a, b in itertools.pairwise(chunks))


@settings(max_examples=200)
@given(text=UNSPACED, budget=BUDGETS)
def test_text_without_spaces_is_cut_between_code_points(text: str, budget: int) -> None:
    chunks = chunk_text(text, budget)

    assert "".join(chunks) == text
    assert all(chunk and estimate_tokens(chunk) <= budget for chunk in chunks)
    assert all(estimate_tokens(a + b) > budget for a, b in itertools.pairwise(chunks))


@given(text=MIXED, budget=BUDGETS)
def test_the_same_text_always_gives_the_same_chunks(text: str, budget: int) -> None:
    assert chunk_text(text, budget) == chunk_text(text, budget)


def test_paragraphs_that_fit_are_never_cut() -> None:
    # Given three paragraphs of 30, 30 and 20 bytes and room for 40 bytes a chunk
    first, second, third = "a" * 26 + ".\n\n\n", "b" * 27 + ".\n\n", "c" * 20

    chunks = chunk_text(first + second + third, 10)

    # Then every chunk is whole paragraphs, their blank lines kept with them
    assert chunks == [first, second, third]


def test_a_paragraph_too_large_is_cut_after_its_sentences() -> None:
    # Given a paragraph of 58 bytes, then a short one, and room for 20 bytes a chunk
    text = "One sentence here. Another one!  A question? And an end.\n\nShort."

    chunks = chunk_text(text, 5)

    # Then the long paragraph is cut after its sentences, and the short one joins the last
    assert chunks == ["One sentence here. ", "Another one!  ", "A question? ", "And an end.\n\nShort."]


def test_decimal_points_do_not_end_sentences() -> None:
    text = "Pi is 3.14159 or so and e is 2.71828 more or less. Next."

    chunks = chunk_text(text, 13)

    assert chunks[0] == "Pi is 3.14159 or so and e is 2.71828 more or less. "


def test_a_chunk_is_filled_up_to_its_budget_exactly() -> None:
    assert chunk_text("abc def ghij", 2) == ["abc def ", "ghij"]
    assert chunk_text("\u00e9\u00e9\u00e9\u00e9\u00e9", 2) == ["\u00e9\u00e9\u00e9\u00e9", "\u00e9"]


def test_a_sentence_too_large_is_cut_after_whitespace() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta."

    chunks = chunk_text(text, 3)

    assert "".join(chunks) == text
    assert all(chunk.endswith(" ") for chunk in chunks[:-1])


def test_a_word_too_large_keeps_multibyte_characters_whole() -> None:
    # Given one 30-character word of 4-byte characters and room for 8 bytes
    word = "\U0001f600" * 30

    chunks = chunk_text(word, 2)

    # Then each chunk holds two whole characters
    assert chunks == ["\U0001f600\U0001f600"] * 15


def test_cjk_sentences_end_at_their_own_full_stop() -> None:
    text = "\u4e2d\u6587\u3002" * 4  # four sentences of 9 bytes each, no spaces

    chunks = chunk_text(text, 5)

    assert chunks == ["\u4e2d\u6587\u3002\u4e2d\u6587\u3002"] * 2


def test_empty_text_has_no_chunks_and_a_budget_below_one_is_refused() -> None:
    assert chunk_text("", 5) == []
    with pytest.raises(ValueError, match="at least 1 token"):
        chunk_text("text", 0)


# --- parameters -------------------------------------------------------------------------------


def test_parameters_default_to_the_design_and_are_frozen() -> None:
    parameters = PlanParameters()

    assert (parameters.plan_version, parameters.chunk_tokens, parameters.step_output_tokens) == (
        "plan-v2",
        6_000,
        800,
    )
    with pytest.raises(ValidationError):
        PlanParameters(chunk_tokens=0)
    with pytest.raises(ValidationError):
        parameters.chunk_tokens = 10  # type: ignore[misc]


def test_the_check_needs_room_for_two_outputs_and_the_reduce_prompt() -> None:
    overhead = max(
        reduce_overhead_tokens(op, "plan-v1", 2)
        for op in (Operation.SUMMARIZE, Operation.ANALYZE, Operation.EXTRACT)
    )
    just_enough = PlanParameters(chunk_tokens=2 * 800 + overhead, step_output_tokens=800)

    check_plan_parameters(PlanParameters())
    check_plan_parameters(just_enough)
    with pytest.raises(ValueError, match=r"2 x 800 \+ \d+ \(prompt overhead\)"):
        check_plan_parameters(PlanParameters(chunk_tokens=2 * 800 + overhead - 1, step_output_tokens=800))


def test_an_unknown_plan_version_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown plan version 'plan-v0'"):
        plan_of("text", parameters=PlanParameters(plan_version="plan-v0"))


def test_the_chunk_budget_leaves_room_for_the_map_prompt() -> None:
    parameters = PlanParameters()

    budget = chunk_budget_tokens(Operation.CLASSIFY, parameters, LABELS)

    assert budget == parameters.chunk_tokens - map_overhead_tokens(Operation.CLASSIFY, "plan-v1", LABELS)
    assert 0 < parameters.chunk_tokens - budget < 200


def test_labels_that_take_most_of_a_chunk_leave_it_half() -> None:
    labels = tuple(f"{n:02d}" + "\u4e2d" * 98 for n in range(50))  # 50 labels of about 300 bytes
    parameters = PlanParameters(chunk_tokens=2_000, step_output_tokens=500)

    assert map_overhead_tokens(Operation.CLASSIFY, "plan-v1", labels) > 1_000
    assert chunk_budget_tokens(Operation.CLASSIFY, parameters, labels) == 1_000


# --- plans ------------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", list(Operation))
def test_an_input_that_fits_one_chunk_is_todays_single_call(operation: Operation) -> None:
    labels = LABELS if operation is Operation.CLASSIFY else None
    text = "The invoice was paid twice. " * 100

    plan = plan_of(text, operation, labels=labels, max_output_tokens=300)

    assert plan.total_steps == 1
    assert plan.reduction is Reduction.NONE
    [step] = plan.steps
    assert step == Step("s0000", StepKind.SINGLE, 0, 0, (), 300)
    assert plan.final_step == step
    assert step_messages(plan, step) == template_for(operation).render(text, labels)
    assert final_output(plan, {"s0000": "the output"}) == "the output"


def test_an_empty_input_is_one_step_too() -> None:
    plan = plan_of("")

    assert ids(plan.steps) == ["s0000"]
    assert plan.chunks == ("",)


def test_two_chunks_are_two_maps_and_one_final_reduce() -> None:
    parameters = PlanParameters()
    text = paragraphs(2, Operation.SUMMARIZE, parameters)

    plan = plan_of(text, parameters=parameters, max_output_tokens=None)

    assert plan.steps == (
        Step("m0000", StepKind.MAP, 0, 0, (), 800),
        Step("m0001", StepKind.MAP, 0, 1, (), 800),
        Step("r1-0000", StepKind.REDUCE, 1, None, ("m0000", "m0001"), MAX_OUTPUT_TOKENS),
    )
    assert plan.reduction is Reduction.MODEL
    assert plan.final_step == plan.steps[-1]
    assert "".join(plan.chunks) == text


def test_many_chunks_reduce_in_balanced_levels_of_at_most_the_group_size() -> None:
    # Given room for 3 outputs per reduce, and 10 chunks
    parameters = PlanParameters(chunk_tokens=3_500, step_output_tokens=1_000)
    assert reduce_group_size(Operation.ANALYZE, parameters, 10) == 3

    plan = plan_of(paragraphs(10, Operation.ANALYZE, parameters), Operation.ANALYZE, parameters, None, 4096)

    # Then 10 maps, 4 reduces of 3, 3, 2, 2, then 2 of 2 and 2, then the final one
    reduces = [(s.step_id, s.level, s.inputs, s.max_tokens) for s in plan.steps if s.kind is StepKind.REDUCE]
    assert reduces == [
        ("r1-0000", 1, ("m0000", "m0001", "m0002"), 1_000),
        ("r1-0001", 1, ("m0003", "m0004", "m0005"), 1_000),
        ("r1-0002", 1, ("m0006", "m0007"), 1_000),
        ("r1-0003", 1, ("m0008", "m0009"), 1_000),
        ("r2-0000", 2, ("r1-0000", "r1-0001"), 1_000),
        ("r2-0001", 2, ("r1-0002", "r1-0003"), 1_000),
        ("r3-0000", 3, ("r2-0000", "r2-0001"), 4096),
    ]
    assert plan.total_steps == 17
    assert ids(plan.map_steps) == [f"m{n:04d}" for n in range(10)]


def test_an_odd_output_out_rides_up_a_level_when_groups_hold_two() -> None:
    parameters = PlanParameters(chunk_tokens=2_500, step_output_tokens=1_000)
    assert reduce_group_size(Operation.SUMMARIZE, parameters, 5) == 2

    plan = plan_of(paragraphs(5, Operation.SUMMARIZE, parameters), parameters=parameters)

    reduces = [(s.step_id, s.inputs) for s in plan.steps if s.kind is StepKind.REDUCE]
    assert reduces == [
        ("r1-0000", ("m0000", "m0001")),
        ("r1-0001", ("m0002", "m0003")),
        ("r2-0000", ("r1-0000", "r1-0001")),
        ("r3-0000", ("r2-0000", "m0004")),
    ]
    assert plan.total_steps == 9


def test_a_long_input_with_the_default_parameters() -> None:
    # Given 50 chunks and the default parameters, where a reduce combines 7 outputs
    parameters = PlanParameters()
    assert reduce_group_size(Operation.SUMMARIZE, parameters, 50) == 7

    plan = plan_of(paragraphs(50, Operation.SUMMARIZE, parameters), parameters=parameters)

    # Then 50 maps, 8 reduces (7, 7, then 6 each), 2 of 4, and the final one
    level_one = [s for s in plan.steps if s.level == 1]
    assert [len(s.inputs) for s in level_one] == [7, 7, 6, 6, 6, 6, 6, 6]
    assert [len(s.inputs) for s in plan.steps if s.level == 2] == [4, 4]
    assert ids([s for s in plan.steps if s.level == 3]) == ["r3-0000"]
    assert plan.total_steps == 61


def test_every_reduce_fits_the_chunk_size_in_the_worst_case() -> None:
    parameters = PlanParameters(chunk_tokens=3_000, step_output_tokens=400)
    plan = plan_of(paragraphs(30, Operation.SUMMARIZE, parameters), parameters=parameters)

    for step in (s for s in plan.steps if s.kind is StepKind.REDUCE):
        worst = ["w" * 400 * 4] * len(step.inputs)  # each output at its cap of estimated tokens
        assert len(step.inputs) >= 2
        assert estimate_tokens("".join(m["content"] for m in step_messages(plan, step, worst))) <= 3_000


@settings(max_examples=50, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab .\n\u00e9\U0001f600")), max_size=3_000),
    operation=st.sampled_from(list(Operation)),
)
def test_every_map_call_fits_the_chunk_size_and_the_plan_is_deterministic(
    text: str, operation: Operation
) -> None:
    parameters = PlanParameters(chunk_tokens=250, step_output_tokens=60)
    labels = LABELS if operation is Operation.CLASSIFY else None

    plan = plan_of(text, operation, parameters, labels)

    assert plan == plan_of(text, operation, parameters, labels)
    assert "".join(plan.chunks) == text
    for step in plan.map_steps:
        assert estimate_tokens("".join(m["content"] for m in step_messages(plan, step))) <= 250
    # And every step runs after its inputs
    seen: set[str] = set()
    for step in plan.steps:
        assert set(step.inputs) <= seen
        seen.add(step.step_id)


def test_classify_votes_instead_of_reducing() -> None:
    parameters = PlanParameters()
    text = paragraphs(3, Operation.CLASSIFY, parameters, LABELS)

    plan = plan_of(text, Operation.CLASSIFY, parameters, LABELS, max_output_tokens=5)

    assert plan.steps == tuple(Step(f"m{n:04d}", StepKind.MAP, 0, n, (), 800) for n in range(3))
    assert plan.reduction is Reduction.VOTE
    assert plan.final_step is None
    outputs = {"m0000": "shipping", "m0001": "Billing.", "m0002": "billing"}
    assert final_output(plan, outputs) == "billing"


def test_ready_steps_follow_the_tree() -> None:
    parameters = PlanParameters(chunk_tokens=2_500, step_output_tokens=1_000)
    plan = plan_of(paragraphs(3, Operation.SUMMARIZE, parameters), parameters=parameters)

    assert ids(ready_steps(plan, set())) == ["m0000", "m0001", "m0002"]
    assert ids(ready_steps(plan, {"m0000", "m0002"})) == ["m0001"]
    assert ids(ready_steps(plan, {"m0000", "m0001", "m0002"})) == ["r1-0000"]
    assert ids(ready_steps(plan, {"m0000", "m0001", "m0002", "r1-0000"})) == ["r2-0000"]
    assert ready_steps(plan, {step.step_id for step in plan.steps}) == []


# --- messages ---------------------------------------------------------------------------------


def test_map_messages_name_the_part_and_fence_the_chunk() -> None:
    parameters = PlanParameters()
    plan = plan_of(
        paragraphs(3, Operation.CLASSIFY, parameters, LABELS), Operation.CLASSIFY, parameters, LABELS
    )

    system, user = step_messages(plan, plan.steps[1])

    assert system["role"] == "system"
    assert "one part of a longer document" in system["content"]
    # Fixed instruction and the job's labels first, then the part number, the chunk last (plan-v2:
    # the longest prefix a job's map calls share, for the provider's prompt cache)
    assert user["content"].startswith(
        "Which label fits this part of a longer document best?\n"
        "Labels:\n- billing\n- shipping\n- technical\n\n"
    )
    assert "This is part 2 of 3." in user["content"]
    assert user["content"].endswith(f"<document>\n{plan.chunks[1]}\n</document>")


def test_every_current_template_puts_its_fixed_instructions_first_and_the_input_last() -> None:
    # DESIGN.md, "Cost tiers": what varies within a job (part number, chunk, outputs) comes after
    # everything that does not, so the provider's prompt cache can key on the longest prefix.
    parameters = PlanParameters()
    for operation in Operation:
        templates = [template_for(operation), map_template(operation, parameters.plan_version)]
        reduce = reduce_template(operation, parameters.plan_version)
        templates += [reduce] if reduce is not None else []
        for template in templates:
            first_varying = min(
                index for index in (template.user.find("{part}"), template.user.find("{text}")) if index >= 0
            )
            assert template.user.rstrip().endswith("</document>") or template.user.endswith("{text}"), (
                template.version
            )
            assert "{labels}" not in template.user[first_varying:], template.version
            assert first_varying > 0, template.version


def test_reduce_messages_fence_each_output_in_order() -> None:
    plan = plan_of(paragraphs(2, Operation.SUMMARIZE, PlanParameters()))
    reduce_step = plan.steps[-1]

    system, user = step_messages(plan, reduce_step, ["First part.", "Second part."])

    assert "combine the summaries" in system["content"]
    assert user["content"].endswith("<part>\nFirst part.\n</part>\n<part>\nSecond part.\n</part>")
    assert "summaries of 2 consecutive parts" in user["content"]
    with pytest.raises(ValueError, match="combines 2 outputs, not 1"):
        step_messages(plan, reduce_step, ["only one"])
    with pytest.raises(ValueError, match="reads a chunk"):
        step_messages(plan, plan.steps[0], ["an output"])


# --- votes ------------------------------------------------------------------------------------


def test_the_label_most_answers_chose_wins() -> None:
    result = vote(["shipping", "technical", "shipping", "billing"], LABELS)

    assert result.label == "shipping"
    assert result.counts == (1, 2, 1)
    assert result.ignored == 0


def test_a_tie_goes_to_the_label_listed_first_not_answered_first() -> None:
    assert vote(["technical", "shipping", "shipping", "technical"], LABELS).label == "shipping"


def test_answers_that_are_no_label_count_for_nothing() -> None:
    result = vote(["I think it is technical", "none", "technical", "billing", "Billing."], LABELS)

    assert result.label == "billing"
    assert result.counts == (2, 0, 1)
    assert result.ignored == 2


def test_when_no_answer_is_a_label_the_first_label_wins_and_says_so() -> None:
    result = vote(["unknown", "no idea"], LABELS)

    assert result.label == "billing"
    assert result.counts == (0, 0, 0)
    assert result.ignored == 2
    with pytest.raises(ValueError, match="at least one label"):
        vote(["billing"], ())


def test_a_label_matches_in_any_case_with_a_trailing_period() -> None:
    assert match_label("  SHIPPING. ", LABELS) == "shipping"
    assert match_label("shipping costs", LABELS) is None


# --- token bound ------------------------------------------------------------------------------


def test_the_bound_of_one_step_is_its_bytes_overhead_and_max_tokens() -> None:
    text = "Caf\u00e9 au lait. " * 10
    plan = plan_of(text, max_output_tokens=None)
    messages = template_for(Operation.SUMMARIZE).render(text)

    assert token_bound(plan) == text_bytes(messages) + 2 * MESSAGE_OVERHEAD_TOKENS + MAX_OUTPUT_TOKENS
    capped = plan_of(text, max_output_tokens=100)
    assert token_bound(capped) == text_bytes(messages) + 2 * MESSAGE_OVERHEAD_TOKENS + 100


def test_the_bound_of_a_map_reduce_plan_counts_every_call() -> None:
    parameters = PlanParameters()
    plan = plan_of(
        paragraphs(2, Operation.SUMMARIZE, parameters), parameters=parameters, max_output_tokens=300
    )
    maps = [step_messages(plan, step) for step in plan.map_steps]
    reduce_frame = step_messages(plan, plan.steps[-1], ["", ""])

    expected = (
        sum(text_bytes(m) + 2 * MESSAGE_OVERHEAD_TOKENS + 800 for m in maps)
        + text_bytes(reduce_frame)
        + 2 * MESSAGE_OVERHEAD_TOKENS
        + 2 * 800 * REREAD_TOKENS_PER_OUTPUT_TOKEN
        + 300
    )
    assert token_bound(plan) == expected


def test_a_vote_adds_nothing_to_the_bound() -> None:
    parameters = PlanParameters()
    plan = plan_of(
        paragraphs(2, Operation.CLASSIFY, parameters, LABELS), Operation.CLASSIFY, parameters, LABELS
    )

    expected = sum(
        text_bytes(step_messages(plan, step)) + 2 * MESSAGE_OVERHEAD_TOKENS + 800 for step in plan.map_steps
    )
    assert token_bound(plan) == expected


def test_steps_are_found_by_id() -> None:
    plan = plan_of(paragraphs(2, Operation.SUMMARIZE, PlanParameters()))

    assert plan.step("r1-0000") is plan.steps[-1]
    with pytest.raises(KeyError):
        plan.step("r9-0000")


def test_classify_has_no_reduce_to_render_or_measure() -> None:
    parameters = PlanParameters()
    plan = plan_of(
        paragraphs(2, Operation.CLASSIFY, parameters, LABELS), Operation.CLASSIFY, parameters, LABELS
    )
    stray = Step("r1-0000", StepKind.REDUCE, 1, None, ("m0000", "m0001"), 800)

    with pytest.raises(ValueError, match="classify plans have no reduce steps"):
        step_messages(plan, stray, ["billing", "billing"])
    with pytest.raises(ValueError, match="reduced by vote"):
        reduce_overhead_tokens(Operation.CLASSIFY, "plan-v1", 2)
