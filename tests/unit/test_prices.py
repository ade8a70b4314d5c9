"""The price table and what tokens cost under it (shared.prices, docs/model-prices.json)."""

from __future__ import annotations

import pytest

from infra.prices import read_price_table
from shared.models import requires_max_completion_tokens
from shared.prices import PriceTable, TierPrice, encode_model_tiers, job_cost, parse_model_tiers
from shared.tiers import Tier

TABLE = PriceTable.model_validate(
    {
        "asOf": "2026-12-03",
        "source": "test",
        "models": {
            "m": {
                "standard": {"input": 2.0, "cachedInput": 0.5, "output": 8.0},
                "flex": {"input": 1.0, "cachedInput": 0.25, "output": 4.0},
            },
            "s": {"standard": {"input": 1.0, "cachedInput": 1.0, "output": 1.0}},
        },
    }
)


def test_cached_input_is_billed_at_its_own_price() -> None:
    price = TierPrice(input=2.0, cached_input=0.5, output=8.0)

    assert price.cost(1_000_000, 400_000, 100_000) == pytest.approx(0.6 * 2 + 0.4 * 0.5 + 0.1 * 8)


def test_a_job_at_one_tier_has_one_figure() -> None:
    cost = job_cost(
        TABLE, "m", tiers=[Tier.FLEX], input_tokens=1_000_000, cached_input_tokens=0, output_tokens=0
    )

    assert cost is not None
    assert cost.exact
    assert cost.low == pytest.approx(1.0)


def test_a_job_that_fell_back_is_priced_between_its_tiers() -> None:
    cost = job_cost(
        TABLE,
        "m",
        tiers=[Tier.FLEX, Tier.STANDARD],
        input_tokens=1_000_000,
        cached_input_tokens=0,
        output_tokens=0,
    )

    assert cost is not None
    assert (cost.low, cost.high) == pytest.approx((1.0, 2.0))


def test_no_recorded_tier_is_standard_and_an_unpriced_model_has_no_cost() -> None:
    assert (
        job_cost(TABLE, "s", tiers=[], input_tokens=1_000_000, cached_input_tokens=0, output_tokens=0)
        is not None
    )
    assert (
        job_cost(TABLE, "unknown", tiers=[], input_tokens=1, cached_input_tokens=1, output_tokens=1) is None
    )


def test_the_offered_tiers_are_priced_and_allowed() -> None:
    assert TABLE.tiers_of(["m", "s", "x"], [Tier.STANDARD, Tier.FLEX]) == {
        "m": (Tier.STANDARD, Tier.FLEX),
        "s": (Tier.STANDARD,),
        "x": (),
    }
    assert TABLE.tiers_of(["m"], [Tier.STANDARD]) == {"m": (Tier.STANDARD,)}


def test_the_setting_text_round_trips() -> None:
    tiers = {"m": (Tier.STANDARD, Tier.FLEX), "x": ()}

    assert parse_model_tiers(encode_model_tiers(tiers)) == tiers


def test_the_published_table_is_dated_and_prices_the_default_model_at_standard() -> None:
    table = read_price_table()

    assert table.as_of
    assert table.source.startswith("https://")
    assert table.price("gpt-4o-mini", Tier.STANDARD) is not None
    for prices in table.models.values():
        for price in prices.values():
            assert price.cached_input <= price.input


@pytest.mark.parametrize(
    ("model", "required"), [("gpt-4o-mini", False), ("gpt-5-mini", True), ("o4-mini", True)]
)
def test_reasoning_models_take_max_completion_tokens(model: str, required: bool) -> None:
    assert requires_max_completion_tokens(model) is required
