"""When a streaming call's text becomes an event (DESIGN.md, "Streaming output": flushing).

Two small pure objects, fed on the model call's thread by functions.worker.output:

- `EdgeTrim` keeps the streamed text equal to the result: a result is the model's text with its
  surrounding whitespace stripped, so leading whitespace is dropped and trailing whitespace is held
  back until more text follows it (and dropped at the end). The events of an attempt then join to
  exactly the output the result stores.
- `FlushPolicy` decides what to write and when: the first text at once (time to first output is
  what a watching client feels), then whenever the buffer holds `max_bytes` (written in pieces of
  exactly that size, the remainder kept) or `max_ms` have passed since the last write, and
  whatever is left at the end. No piece is longer than `max_bytes` UTF-8 bytes, so with its keys an
  event stays one write unit. Time comes in as an argument (a monotonic clock's seconds): the
  policy has no clock of its own, and its tests drive a fake one.
"""

from __future__ import annotations


class EdgeTrim:
    """Streamed deltas in, the same text out less its leading and trailing whitespace."""

    def __init__(self) -> None:
        self._started = False
        self._held = ""  # trailing whitespace, shown only once something follows it

    def feed(self, delta: str) -> str:
        """The text that may be shown now (possibly empty)."""
        text = self._held + delta
        if not self._started:
            text = text.lstrip()
            if not text:
                self._held = ""
                return ""
            self._started = True
        shown = text.rstrip()
        self._held = text[len(shown) :]
        return shown


class FlushPolicy:
    """Buffers text and says which pieces to write, and when."""

    def __init__(self, max_bytes: int, max_ms: int) -> None:
        if max_bytes < 4:
            raise ValueError("a piece must hold at least one character (4 UTF-8 bytes)")
        self._max_bytes = max_bytes
        self._max_seconds = max_ms / 1000
        self._buffer = ""
        self._buffered_bytes = 0
        self._last_write: float | None = None  # None: nothing written yet

    def add(self, text: str, now: float) -> list[str]:
        """Buffer `text`; the pieces to write now, in order."""
        if not text:
            return []
        self._buffer += text
        self._buffered_bytes += len(text.encode("utf-8"))
        if self._last_write is None or now - self._last_write >= self._max_seconds:
            return self._drain(now, everything=True)
        if self._buffered_bytes >= self._max_bytes:
            return self._drain(now, everything=False)
        return []

    def finish(self, now: float) -> list[str]:
        """Whatever is still buffered, once the call has ended."""
        return self._drain(now, everything=True) if self._buffer else []

    def _drain(self, now: float, *, everything: bool) -> list[str]:
        pieces = split_utf8(self._buffer, self._max_bytes)
        if not everything and len(pieces[-1].encode("utf-8")) < self._max_bytes:
            # Full pieces only: the rest waits for more text, the time limit or the end.
            self._buffer = pieces.pop()
        else:
            self._buffer = ""
        self._buffered_bytes = len(self._buffer.encode("utf-8"))
        if pieces:
            self._last_write = now
        return pieces


def split_utf8(text: str, max_bytes: int) -> list[str]:
    """`text` in pieces of at most `max_bytes` UTF-8 bytes each, never splitting a character."""
    data = text.encode("utf-8")
    pieces: list[str] = []
    start = 0
    while start < len(data):
        end = min(start + max_bytes, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # a continuation byte: back off
            end -= 1
        pieces.append(data[start:end].decode("utf-8"))
        start = end
    return pieces
