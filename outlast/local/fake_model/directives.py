"""The directives a message's text may carry, and the per-request counters of the counted faults.

A counted fault (`[[fault:KIND*N]]`) fails the first N calls of the same messages; several run in
the order written. A permanent fault (`[[fault:KIND]]`) fails every call. `[[delay:SECONDS]]`
holds the answer. A new fault is a name added to COUNTED_FAULTS or PERMANENT_FAULTS and its
answer in outlast.local.fake_model.replies (or, for one the HTTP layer acts out, as the timeout's
stall is, there).
"""

from __future__ import annotations

import re
import threading

from outlast.local.fake_model.requests import ChatRequest

# `stream_cut` is acted out by the HTTP layer: a streamed answer whose connection breaks after a few
# pieces (a call that does not stream is answered as usual, and counts all the same). `invalid_json`
# is an answer, not an error: a structured answer that breaks its schema (a text answer is as ever).
# `flex_unavailable` refuses flex calls only (429 `resource_unavailable`); a standard call of the
# same messages is answered, as a flex job that fell back to standard is.
COUNTED_FAULTS = ("rate_limit", "server_error", "timeout", "stream_cut", "invalid_json", "flex_unavailable")
# Counted faults that still answer 200 with a completion (streamed when asked).
ANSWERED_FAULTS = frozenset({"stream_cut", "invalid_json"})
PERMANENT_FAULTS = ("context_length", "content_policy")

_COUNTED_FAULT = re.compile(rf"\[\[fault:({'|'.join(COUNTED_FAULTS)})\*(\d+)\]\]")
_PERMANENT_FAULT = re.compile(rf"\[\[fault:({'|'.join(PERMANENT_FAULTS)})\]\]")
_DELAY = re.compile(r"\[\[delay:(\d+(?:\.\d*)?|\.\d+)\]\]")
_PACE = re.compile(r"\[\[pace:(\d+(?:\.\d*)?|\.\d+)\]\]")
_DIRECTIVE = re.compile(r"\[\[(?:fault|delay|pace):[^\]]*\]\]")


def strip_directives(text: str) -> str:
    """The text without directives, removed until none is left (removing one can't form another)."""
    while True:
        stripped = _DIRECTIVE.sub("", text)
        if stripped == text:
            return text
        text = stripped


def delay_seconds(text: str) -> float:
    """The first [[delay:SECONDS]] directive, or no delay."""
    found = _DELAY.search(text)
    return float(found.group(1)) if found else 0.0


def pace_tokens_per_second(text: str) -> float | None:
    """The first [[pace:N]] directive (a streamed answer's tokens a second), or as fast as it can."""
    found = _PACE.search(text)
    pace = float(found.group(1)) if found else 0.0
    return pace if pace > 0 else None


class FaultCounters:
    """How many times each request (by its messages' hash) was called, against its fault schedule."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}

    def take(self, request: ChatRequest) -> str | None:
        """The fault this call must show, counting it against the request's schedule."""
        text = request.text
        permanent = _PERMANENT_FAULT.search(text)
        if permanent:
            return str(permanent.group(1))
        schedule = [(str(kind), int(times)) for kind, times in _COUNTED_FAULT.findall(text)]
        if not schedule:
            return None
        with self._lock:
            call = self._counters.get(request.request_hash, 0) + 1
            self._counters[request.request_hash] = call
        for kind, times in schedule:
            if call <= times:
                return None if kind == "flex_unavailable" and not request.flex else kind
            call -= times
        return None

    def reset(self) -> None:
        """Forget every count (`POST /_faults/reset`)."""
        with self._lock:
            self._counters.clear()
