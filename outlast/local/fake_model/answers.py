"""The fake model's answers: deterministic, derived from the document in the prompt.

The operation and the kind of call (one call for the whole input, a map call over one part, a
reduce call over `<part>`-fenced outputs) are recognised by the exact system prompt of any
template version outlast ships, or else by a keyword. A map answer is the operation's answer for
its part (a classify map answer is one of the labels); a summarize reduce joins the first
sentence of each output, shortened to share `SUMMARY_MAX_WORDS`; an analyze reduce adds up the
counts of the analyses it combines. No answer ever holds a directive: they are removed from the
document and, to be sure, from the answer, so a reduce call never inherits a fault from the
outputs it combines.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

from outlast.local.fake_model.directives import strip_directives
from outlast.local.fake_model.requests import ChatRequest
from outlast.local.fake_model.structured import merged_words, structured_answer, words_of
from shared.contract import Operation
from shared.prompts import BY_VERSION, PART_CLOSE, PART_OPEN, PromptKind, PromptTemplate

SUMMARY_SENTENCES = 2
SUMMARY_MAX_WORDS = 60
FREQUENT_WORDS = 5

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")
_PART = re.compile(rf"{re.escape(PART_OPEN)}\n(.*?)\n{re.escape(PART_CLOSE)}", re.DOTALL)
_PART_NUMBER = re.compile(r"This is part (\d+) of (\d+)")
_ANALYSIS_COUNT = re.compile(r"^(Words|Sentences): (\d+)$", re.MULTILINE)
_ANALYSIS_FREQUENT = re.compile(r"^Most frequent words: (.*)$", re.MULTILINE)
_FREQUENT_ITEM = re.compile(r"(\S+) \((\d+)\)")

# Exact system prompts of every template version shipped; other prompts fall back to keywords.
_TEMPLATE_BY_SYSTEM = {template.system: template for template in BY_VERSION.values()}


def detect_template(system: str) -> PromptTemplate | None:
    """The template version the worker rendered, when its system prompt is one outlast ships."""
    return _TEMPLATE_BY_SYSTEM.get(system)


def detect_operation(system: str) -> Operation | None:
    """Which operation the worker asked for, from its system prompt."""
    template = detect_template(system)
    if template is not None:
        return template.operation
    lowered = system.lower()
    for operation, keyword in (
        (Operation.CLASSIFY, "classify"),
        (Operation.SUMMARIZE, "summarize"),
        (Operation.ANALYZE, "analyze"),
    ):
        if keyword in lowered:
            return operation
    return None


def document_of(user: str) -> str:
    """The text between <document> tags (the whole message when there are none), directives removed."""
    start, end = user.find("<document>"), user.rfind("</document>")
    text = user[start + len("<document>") : end] if 0 <= start < end else user
    return strip_directives(text).strip()


def parts_of(user: str) -> list[str]:
    """The outputs a reduce prompt combines, in order, directives removed."""
    return [strip_directives(part).strip() for part in _PART.findall(user)]


def part_of(user: str) -> tuple[int | None, int | None]:
    """The part number and the number of parts a map prompt names, read before its document."""
    found = _PART_NUMBER.search(user.split("<document>", 1)[0])
    return (int(found.group(1)), int(found.group(2))) if found else (None, None)


def labels_of(user: str) -> list[str]:
    """The `- label` lines after `Labels:`, read before the document so its text can't add any."""
    head = user.split("<document>", 1)[0]
    if "Labels:" not in head:
        return []
    lines = head.split("Labels:", 1)[1].splitlines()
    return [line[2:].strip() for line in lines if line.startswith("- ") and line[2:].strip()]


def summarize(document: str) -> str:
    """The first sentences of the document, trimmed."""
    sentences = [s for s in _SENTENCE_END.split(" ".join(document.split())) if s]
    if not sentences:
        return "The document is empty."
    words = " ".join(sentences[:SUMMARY_SENTENCES]).split()
    if len(words) <= SUMMARY_MAX_WORDS:
        return " ".join(words)
    return " ".join(words[:SUMMARY_MAX_WORDS]) + " ..."


def analyze(document: str) -> str:
    """A few facts anyone can recompute from the document."""
    return _format_analysis(*_analysis_counts(document))


def _analysis_counts(document: str) -> tuple[int, int, Counter[str]]:
    words = [w.lower() for w in _WORD.findall(document)]
    sentences = [s for s in _SENTENCE_END.split(document.strip()) if s.strip()]
    # Short words are mostly articles and prepositions: they would top every document.
    return len(words), len(sentences), Counter(w for w in words if len(w) > 3)


def _format_analysis(words: int, sentences: int, frequent: Counter[str]) -> str:
    top = sorted(frequent.items(), key=lambda item: (-item[1], item[0]))[:FREQUENT_WORDS]
    listed = ", ".join(f"{word} ({count})" for word, count in top) or "none"
    return f"Words: {words}\nSentences: {sentences}\nMost frequent words: {listed}"


def classify(document: str, labels: list[str]) -> str:
    """The label named most often in the document, else one chosen by a hash of the text."""
    if not labels:
        return "unlabeled"
    mentions = [
        len(re.findall(rf"(?<!\w){re.escape(label)}(?!\w)", document, re.IGNORECASE)) for label in labels
    ]
    if max(mentions) > 0:
        return labels[mentions.index(max(mentions))]  # ties go to the label listed first
    digest = hashlib.sha256(document.encode()).digest()
    return labels[int.from_bytes(digest[:8], "big") % len(labels)]


def combine_summaries(parts: list[str]) -> str:
    """The first sentence of each summary, in order, each shortened to its share of the words."""
    share = max(1, SUMMARY_MAX_WORDS // max(1, len(parts)))
    firsts: list[str] = []
    for part in parts:
        sentences = [s for s in _SENTENCE_END.split(" ".join(part.split())) if s]
        if sentences:
            words = sentences[0].split()
            firsts.append(" ".join(words[:share]) + (" ..." if len(words) > share else ""))
    return " ".join(firsts) if firsts else "The document is empty."


def combine_analyses(parts: list[str]) -> str:
    """One analysis summing the counts of those it combines (a part that is no analysis is analyzed)."""
    words = sentences = 0
    frequent: Counter[str] = Counter()
    for part in parts:
        part_words, part_sentences, part_frequent = _parse_analysis(part) or _analysis_counts(part)
        words, sentences = words + part_words, sentences + part_sentences
        frequent.update(part_frequent)
    return _format_analysis(words, sentences, frequent)


def _parse_analysis(text: str) -> tuple[int, int, Counter[str]] | None:
    """The counts of an analysis this server wrote; None when the text is not one."""
    counts = dict(_ANALYSIS_COUNT.findall(text))
    listed = _ANALYSIS_FREQUENT.search(text)
    if "Words" not in counts or "Sentences" not in counts or listed is None:
        return None
    frequent = Counter({word: int(count) for word, count in _FREQUENT_ITEM.findall(listed.group(1))})
    return int(counts["Words"]), int(counts["Sentences"]), frequent


def answer(request: ChatRequest, *, broken: bool = False) -> str:
    """The model's answer to the operation the prompt asks for, never holding a directive; with a
    response schema, an instance of it (`broken`: one that breaks it; outlast.local.fake_model.structured)."""
    system, user = request.last("system"), request.last("user")
    operation = detect_operation(system)
    template = detect_template(system)
    if request.response_schema is not None:
        is_reduce = template is not None and template.kind is PromptKind.REDUCE
        words = merged_words(parts_of(user)) if is_reduce else words_of(document_of(user))
        return structured_answer(request.response_schema, words, broken=broken)
    if template is not None and template.kind is PromptKind.REDUCE:
        parts = parts_of(user)
        combined = combine_analyses(parts) if operation is Operation.ANALYZE else combine_summaries(parts)
        return strip_directives(combined)
    document = document_of(user)
    if operation is Operation.CLASSIFY:
        result = classify(document, labels_of(user))
    elif operation is Operation.ANALYZE:
        result = analyze(document)
    else:
        result = summarize(document)  # summarize, and any prompt this server doesn't know
    return strip_directives(result)
