"""backoff_seconds: exponential, capped, equal jitter, never shorter than the provider's hint, >= 1 s."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from functions.worker.backoff import backoff_seconds


def fixed(value: float) -> Callable[[], float]:
    """A fake random source that always answers `value` (random.random's range is [0, 1))."""
    return lambda: value


HIGHEST = fixed(0.999_999)
LOWEST = fixed(0.0)


@pytest.mark.parametrize(("attempts", "expected"), [(1, 2), (2, 4), (3, 8), (4, 16), (5, 32)])
def test_the_ceiling_doubles_with_each_attempt(attempts: int, expected: int) -> None:
    # Given a 2 s base, no cap in reach and the top of the jitter range
    # When the delay after `attempts` claims is computed
    delay = backoff_seconds(attempts, base=2, cap=1_000, provider_hint=None, random=HIGHEST)

    # Then it is base * 2^(attempts - 1)
    assert delay == expected


@pytest.mark.parametrize(("attempts", "expected"), [(1, 1), (2, 2), (3, 4), (4, 8)])
def test_equal_jitter_never_goes_below_half_the_ceiling(attempts: int, expected: int) -> None:
    # Given the bottom of the jitter range
    delay = backoff_seconds(attempts, base=2, cap=1_000, provider_hint=None, random=LOWEST)

    # Then the delay is half the exponential ceiling
    assert delay == expected


@pytest.mark.parametrize("draw", [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999_999])
@pytest.mark.parametrize("attempts", [1, 2, 3, 6])
def test_every_draw_lands_between_half_and_the_whole_ceiling(attempts: int, draw: float) -> None:
    ceiling = 3.0 * 2 ** (attempts - 1)

    delay = backoff_seconds(attempts, base=3, cap=1_000, provider_hint=None, random=fixed(draw))

    assert math.ceil(ceiling / 2) <= delay <= math.ceil(ceiling)
    assert delay == math.ceil(ceiling / 2 + draw * ceiling / 2)


def test_the_jitter_is_linear_in_the_random_draw() -> None:
    # Given a ceiling of 40 s (base 10, third attempt)
    # When the draw moves from 0 to 0.5 to just under 1
    delays = [backoff_seconds(3, 10, 1_000, None, fixed(d)) for d in (0.0, 0.5, 0.999_999)]

    # Then the delay moves from 20 s to 30 s to 40 s
    assert delays == [20, 30, 40]


def test_the_cap_bounds_the_ceiling() -> None:
    # Given an attempt whose exponential delay (2 * 2^19 s) is far beyond the 300 s cap
    # When the delay is computed at both ends of the jitter
    high = backoff_seconds(20, base=2, cap=300, provider_hint=None, random=HIGHEST)
    low = backoff_seconds(20, base=2, cap=300, provider_hint=None, random=LOWEST)

    # Then the cap is the ceiling, and equal jitter still applies below it
    assert high == 300
    assert low == 150


def test_a_longer_provider_hint_wins() -> None:
    # Given a provider asking for 30 s where our own backoff says at most 2 s
    delay = backoff_seconds(1, base=2, cap=300, provider_hint=30, random=HIGHEST)

    # Then the provider's Retry-After is honoured
    assert delay == 30


def test_a_shorter_provider_hint_does_not_shorten_the_backoff() -> None:
    delay = backoff_seconds(4, base=2, cap=300, provider_hint=1, random=LOWEST)

    assert delay == 8


def test_a_fractional_provider_hint_is_rounded_up_to_whole_seconds() -> None:
    # Given retry-after-ms: 2500 (a visibility timeout has one-second resolution)
    delay = backoff_seconds(1, base=1, cap=300, provider_hint=2.5, random=LOWEST)

    # Then the message is hidden long enough, never shorter
    assert delay == 3


def test_a_provider_hint_longer_than_the_cap_still_wins() -> None:
    # The provider's Retry-After is a promise of refusal: calling before it only burns an attempt
    delay = backoff_seconds(1, base=1, cap=20, provider_hint=60, random=LOWEST)

    assert delay == 60


@pytest.mark.parametrize(
    ("base", "hint"),
    [(0.01, None), (0.1, None), (0.5, 0.0), (0.01, 0.2)],
)
def test_the_delay_is_at_least_one_second(base: float, hint: float | None) -> None:
    # Given tiny delays (a visibility timeout of 0 would redeliver at once)
    delay = backoff_seconds(1, base=base, cap=300, provider_hint=hint, random=LOWEST)

    # Then the message is still hidden for a second
    assert delay == 1


@pytest.mark.parametrize("attempts", [0, -3])
def test_attempts_below_one_count_as_the_first(attempts: int) -> None:
    delay = backoff_seconds(attempts, base=4, cap=300, provider_hint=None, random=HIGHEST)

    assert delay == 4


def test_the_delay_is_a_whole_number_of_seconds() -> None:
    delay = backoff_seconds(2, base=1.3, cap=300, provider_hint=None, random=fixed(0.37))

    assert isinstance(delay, int)
