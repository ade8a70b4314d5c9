"""Generated documents for the demo and the benchmarks: long, deterministic, in paragraphs."""

from __future__ import annotations

TOPICS = ("revenue", "costs", "hiring", "shipping", "support", "security", "research", "outlook")


def long_document(max_bytes: int, delay_seconds: float | None = None) -> str:
    """Report text in paragraphs, as close to `max_bytes` UTF-8 bytes as whole paragraphs allow.

    With `delay_seconds`, every paragraph asks the local model server to take that long, so every
    step's call of a job planned in steps does (a directive applies to the call that holds it).
    """
    directive = f" [[delay:{delay_seconds:g}]]" if delay_seconds else ""
    paragraphs: list[str] = []
    size = 0
    while True:
        number = len(paragraphs)
        topic = TOPICS[number % len(TOPICS)]
        paragraph = (
            " ".join(
                f"Section {number + 1} on {topic}: in week {line + 1} the {topic} figures moved as planned, "
                f"and the team noted one change worth a closer look."
                for line in range(12)
            )
            + directive
        )
        added = len(paragraph.encode("utf-8")) + (2 if paragraphs else 0)
        if size + added > max_bytes:
            return "\n\n".join(paragraphs)
        paragraphs.append(paragraph)
        size += added
