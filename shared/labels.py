"""A classify answer in the caller's spelling of its label (DESIGN.md, "HTTP contract": classify).

Apart from the writers that use it (the worker's terminal write, the batch poller's) because both
end a classify job with the model's answer, and a job's result must not depend on which did.
"""

from __future__ import annotations


def normalize_label(text: str, labels: tuple[str, ...] | None) -> str:
    """For classify, answer with the caller's spelling of a label when the model's casing differs."""
    if not labels:
        return text
    by_folded = {label.casefold(): label for label in labels}
    return by_folded.get(text.strip().strip(".").casefold(), text)
