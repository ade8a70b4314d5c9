"""The client's per-attempt reassembly of a streaming job's text (outlast.reassembly)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from outlast.reassembly import Reassembly

WORDS = ["Once", " upon", " a", " time", ", the", " end."]


def test_events_in_order_grow_the_text() -> None:
    text = Reassembly()

    changes = [text.add(1, seq, word) for seq, word in enumerate(WORDS, start=1)]

    assert changes == [True] * len(WORDS)
    assert text.text() == "Once upon a time, the end."
    assert text.cursor() == (1, 6)


def test_an_event_past_a_gap_waits_until_the_gap_fills() -> None:
    text = Reassembly()
    text.add(1, 1, "Once")

    assert text.add(1, 3, " a") is False
    assert text.text() == "Once"
    assert text.has_gap(1)
    assert text.cursor() == (1, 1)  # resume after the last contiguous event
    assert text.add(1, 2, " upon") is True
    assert text.text() == "Once upon a"
    assert not text.has_gap(1)


def test_a_repeated_event_changes_nothing() -> None:
    text = Reassembly()
    text.add(1, 1, "Once")
    text.add(1, 3, " a")

    assert text.add(1, 1, "Once") is False
    assert text.add(1, 3, " a") is False
    assert text.text() == "Once"


def test_replayed_and_live_events_interleaved_join_once_in_order() -> None:
    # Given a follow whose replay (1..4) and live pushes (3..6) cross
    replay = [(1, n, WORDS[n - 1]) for n in range(1, 5)]
    live = [(1, n, WORDS[n - 1]) for n in range(3, 7)]
    arrivals = [live[0], replay[0], live[1], replay[1], replay[2], live[2], replay[3], live[3]]
    text = Reassembly()

    for event in arrivals:
        text.add(*event)

    assert text.text() == "".join(WORDS)


def test_a_newer_attempt_replaces_an_older_ones_text() -> None:
    text = Reassembly()
    text.add(1, 1, "Cut")
    text.add(1, 2, " short")

    assert text.add(2, 1, "Whole") is True
    assert text.shown_attempt == 2
    assert text.text() == "Whole"
    assert text.cursor() == (2, 1)
    # A late event of the older attempt changes nothing shown
    assert text.add(1, 3, " text") is False
    assert text.text(1) == "Cut short text"


def test_once_ended_the_result_attempt_is_shown_even_if_older() -> None:
    text = Reassembly()
    text.add(1, 1, "Stored result")
    text.add(2, 1, "Unused")

    text.settle(1)

    assert text.text() == "Stored result"
    assert text.cursor() == (1, 1)


def test_nothing_yet_resumes_from_the_start() -> None:
    text = Reassembly()

    assert (text.shown_attempt, text.text(), text.cursor()) == (None, "", (0, 0))


@given(st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_any_order_with_repeats_joins_to_the_text(pieces: list[str], rng: random.Random) -> None:
    events = [(1, seq, piece) for seq, piece in enumerate(pieces, start=1)]
    arrivals = events + rng.sample(events, k=len(events) // 2)
    rng.shuffle(arrivals)
    text = Reassembly()

    for event in arrivals:
        text.add(*event)

    assert text.text() == "".join(pieces)
    assert text.cursor() == (1, len(pieces))
