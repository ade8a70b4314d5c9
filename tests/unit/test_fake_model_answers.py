"""The fake model's answers, as pure functions: map and reduce prompts, no directive echoed."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from outlast.local.fake_model.answers import (
    answer,
    combine_analyses,
    combine_summaries,
    detect_operation,
    detect_template,
    part_of,
)
from outlast.local.fake_model.completions import count_tokens, truncate
from outlast.local.fake_model.directives import strip_directives
from outlast.local.fake_model.replies import context_reply
from outlast.local.fake_model.requests import ChatRequest, messages_hash
from shared.contract import Operation
from shared.prompts import BY_VERSION, MAP_TEMPLATES, REDUCE_TEMPLATES, template_for

LABELS = ("billing", "shipping", "technical")
# Written out here, not imported: the test must not share the server's idea of a directive.
DIRECTIVE = re.compile(r"\[\[(?:fault|delay):[^\]]*\]\]")
FRAGMENTS = st.sampled_from(
    [
        "[[fault:rate_limit*2]]",
        "[[fault:content_policy]]",
        "[[delay:1]]",
        "[[fa",
        "ult:timeout*1]]",
        "[[",
        "]]",
        "delay:",
        "Words: 3",
        "Refund it now.",
        " ",
        "\n",
        "billing",
        ". ",
    ]
)
TEXTS = st.lists(FRAGMENTS, max_size=30).map("".join)


def request(chat: list[dict[str, str]], max_tokens: int | None = None) -> ChatRequest:
    return ChatRequest("gpt-4o-mini", list(chat), max_tokens, messages_hash(list(chat)))


def every_kind_of_call(text: str) -> list[list[dict[str, str]]]:
    """The text as each template outlast ships would send it: whole, as a chunk, as outputs."""
    chats = [template_for(op).render(text, LABELS) for op in Operation]
    chats += [template.render(text, LABELS, part=2, parts=3) for template in MAP_TEMPLATES.values()]
    chats += [template.render_parts([text, text]) for template in REDUCE_TEMPLATES.values()]
    return chats


@given(text=TEXTS)
def test_no_answer_ever_holds_a_directive(text: str) -> None:
    for chat in every_kind_of_call(text):
        assert not DIRECTIVE.search(answer(request(chat)))


def test_a_directive_hidden_inside_another_is_removed_too() -> None:
    assert strip_directives("a [[fa[[delay:1]]ult:content_policy]] b") == "a  b"
    assert strip_directives("[[[[fault:rate_limit*1]]fault:timeout*1]]x") == "x"


def test_every_shipped_template_is_recognised_by_its_system_prompt() -> None:
    for template in BY_VERSION.values():
        assert detect_template(template.system) is template
        assert detect_operation(template.system) is template.operation
    assert detect_template("You summarize things.") is None
    assert detect_operation("You summarize things.") is Operation.SUMMARIZE


def test_a_map_answer_is_the_operations_answer_for_its_part() -> None:
    document = "The parcel is late. Shipping was slow. Nobody called."
    summary_map = MAP_TEMPLATES[Operation.SUMMARIZE].render(document, part=1, parts=2)
    classify_map = MAP_TEMPLATES[Operation.CLASSIFY].render(document, LABELS, part=2, parts=2)

    assert answer(request(summary_map)) == answer(request(template_for(Operation.SUMMARIZE).render(document)))
    assert answer(request(classify_map)) == "shipping"
    assert part_of(classify_map[1]["content"]) == (2, 2)
    assert part_of(template_for(Operation.SUMMARIZE).render(document)[1]["content"]) == (None, None)


def test_a_summary_reduce_joins_a_share_of_each_first_sentence() -> None:
    parts = ["One two three four. Five.", "Six seven. Eight nine.", ""]

    assert combine_summaries(parts) == "One two three four. Six seven."
    assert combine_summaries([" ".join(["word"] * 40) + ".", "Short one."]) == (
        " ".join(["word"] * 30) + " ... Short one."
    )
    assert combine_summaries([]) == "The document is empty."


def test_a_summary_reduce_of_many_parts_stays_short() -> None:
    chat = REDUCE_TEMPLATES[Operation.SUMMARIZE].render_parts(
        [f"Part {n} says a lot of things here." for n in range(7)]
    )

    assert len(answer(request(chat)).split()) <= 60 + 7


def test_an_analysis_reduce_sums_counts_and_analyzes_what_is_no_analysis() -> None:
    parts = [
        "Words: 4\nSentences: 2\nMost frequent words: refund (2), late (1)",
        "Words: 2\nSentences: 1\nMost frequent words: none",
        "Refund, late again.",
    ]

    assert combine_analyses(parts).splitlines() == [
        "Words: 9",
        "Sentences: 4",
        "Most frequent words: refund (3), late (2), again (1)",
    ]


def test_the_context_reply_is_none_when_the_call_fits() -> None:
    chat = [{"role": "user", "content": "x" * 40}]  # 10 estimated tokens

    assert context_reply(request(chat), 10) is None
    assert context_reply(request(chat, max_tokens=5), 15) is None


@pytest.mark.parametrize(
    ("max_tokens", "message"),
    [
        (
            None,
            "This model's maximum context length is 9 tokens. However, your messages resulted in 10 tokens. "
            "Please reduce the length of the messages.",
        ),
        (
            5,
            "This model's maximum context length is 9 tokens. However, you requested 15 tokens (10 in the "
            "messages, 5 in the completion). Please reduce the length of the messages or completion.",
        ),
    ],
)
def test_the_context_reply_is_openais(max_tokens: int | None, message: str) -> None:
    chat = [{"role": "system", "content": "x" * 20}, {"role": "user", "content": "\u00e9" * 10}]

    reply = context_reply(request(chat, max_tokens), 9)

    assert reply is not None
    assert reply.status == 400
    assert reply.body == {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


@pytest.mark.parametrize("text", ["word " * 5000, "a" * 20_000, "語" * 8000])
def test_an_answer_never_runs_past_max_tokens_even_without_spaces(text: str) -> None:
    # A real model stops at max_tokens; a reduce over unbounded map answers would otherwise grow
    # past any context (a 1 MiB input without spaces did)
    cut, was_cut = truncate(text, 100)

    assert was_cut is True
    assert count_tokens(cut) <= 100
    assert cut
    assert truncate("short answer", 100) == ("short answer", False)
