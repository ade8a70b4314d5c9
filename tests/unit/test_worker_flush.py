"""The flush policy over a fake clock, and the edge trim (functions.worker.flush)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from functions.worker.flush import EdgeTrim, FlushPolicy, split_utf8


class FakeMonotonic:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def advance(self, milliseconds: float) -> float:
        self.now += milliseconds / 1000
        return self.now


@pytest.fixture
def clock() -> FakeMonotonic:
    return FakeMonotonic()


class TestFlushPolicy:
    def test_the_first_text_is_written_at_once(self, clock: FakeMonotonic) -> None:
        policy = FlushPolicy(max_bytes=900, max_ms=500)

        assert policy.add("Once", clock.now) == ["Once"]

    def test_later_text_waits_until_the_time_limit_since_the_last_write(self, clock: FakeMonotonic) -> None:
        # Given a first write
        policy = FlushPolicy(max_bytes=900, max_ms=500)
        policy.add("Once", clock.now)

        # When more text comes within 500 ms, nothing is written; at 500 ms, all of it is
        assert policy.add(" upon", clock.advance(200)) == []
        assert policy.add(" a", clock.advance(299)) == []
        assert policy.add(" time", clock.advance(1)) == [" upon a time"]
        # And the time limit counts from that write
        assert policy.add(",", clock.advance(499)) == []
        assert policy.add(" there", clock.advance(1)) == [", there"]

    def test_a_full_buffer_is_written_before_its_time_in_full_pieces(self, clock: FakeMonotonic) -> None:
        policy = FlushPolicy(max_bytes=10, max_ms=500)
        policy.add("a", clock.now)

        assert policy.add("123456789", clock.advance(10)) == []
        assert policy.add("0XYZ", clock.advance(10)) == ["1234567890"]
        # The remainder waits: for the time limit, counted from that write
        assert policy.add("!", clock.advance(499)) == []
        assert policy.add("?", clock.advance(1)) == ["XYZ!?"]

    def test_a_large_delta_is_written_in_pieces_of_the_limit(self, clock: FakeMonotonic) -> None:
        policy = FlushPolicy(max_bytes=4, max_ms=500)
        policy.add("a", clock.now)

        assert policy.add("bcdefghijk", clock.advance(1)) == ["bcde", "fghi"]
        assert policy.finish(clock.advance(1)) == ["jk"]

    def test_the_end_writes_what_is_left_and_nothing_when_nothing_is(self, clock: FakeMonotonic) -> None:
        policy = FlushPolicy(max_bytes=900, max_ms=500)
        policy.add("Once", clock.now)
        policy.add(" upon", clock.advance(1))

        assert policy.finish(clock.advance(1)) == [" upon"]
        assert policy.finish(clock.advance(1)) == []

    def test_empty_text_writes_nothing_even_first(self, clock: FakeMonotonic) -> None:
        policy = FlushPolicy(max_bytes=900, max_ms=500)

        assert policy.add("", clock.now) == []
        assert policy.add("x", clock.advance(1)) == ["x"]

    def test_no_piece_splits_a_character(self, clock: FakeMonotonic) -> None:
        policy = FlushPolicy(max_bytes=5, max_ms=500)
        policy.add("a", clock.now)

        pieces = policy.add("ééé🚀", clock.advance(1)) + policy.finish(clock.advance(1))

        assert pieces == ["éé", "é", "🚀"]
        assert all(len(piece.encode()) <= 5 for piece in pieces)

    @given(
        deltas=st.lists(
            st.tuples(st.text(max_size=40), st.integers(min_value=0, max_value=700)), max_size=40
        ),
        max_bytes=st.integers(min_value=4, max_value=64),
    )
    def test_the_pieces_join_to_the_text_and_stay_within_the_limit(
        self, deltas: list[tuple[str, int]], max_bytes: int
    ) -> None:
        clock = FakeMonotonic()
        policy = FlushPolicy(max_bytes=max_bytes, max_ms=500)
        written: list[str] = []
        for text, wait in deltas:
            written += policy.add(text, clock.advance(wait))
        written += policy.finish(clock.advance(0))

        assert "".join(written) == "".join(text for text, _ in deltas)
        assert all(0 < len(piece.encode()) <= max_bytes for piece in written)


class TestEdgeTrim:
    def test_leading_whitespace_is_dropped_and_trailing_held_until_text_follows(self) -> None:
        trim = EdgeTrim()

        shown = [trim.feed(delta) for delta in ["\n ", " Once", " upon ", "\n", "a time", "  \n"]]

        assert shown == ["", "Once", " upon", "", " \na time", ""]

    @given(st.lists(st.text(alphabet=" \n\tab\u00a0é", max_size=8), max_size=12))
    def test_what_is_shown_joins_to_the_stripped_text(self, deltas: list[str]) -> None:
        trim = EdgeTrim()

        assert "".join(trim.feed(delta) for delta in deltas) == "".join(deltas).strip()


def test_split_utf8_never_cuts_a_character() -> None:
    assert split_utf8("aé🚀", 4) == ["aé", "🚀"]
    assert split_utf8("", 4) == []
