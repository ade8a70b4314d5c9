"""The computed budget line of `make bench` (outlast.bench.budgets): the units, and its section."""

from __future__ import annotations

import pytest

from outlast.bench import budgets
from outlast.bench.prices import load_prices
from outlast.bench.report import budget_section


def test_a_limit_costs_two_transactions_and_an_index_entry_in_and_out() -> None:
    # Given the ledger's own items, each under a KB
    counted = budgets.units()
    assert counted["itemBytes"]["reservation"] < 1024
    assert counted["itemBytes"]["counter"] < 1024

    # Then a job of a tenant with a limit pays 2 x (1 + 1) to reserve, the same to settle, and 1 + 1
    # in the index; a tenant without one pays no write, only the budget read of its submits
    limited, unlimited = counted["withLimit"], counted["withoutLimit"]
    assert (limited["writeUnitsTables"], limited["writeUnitsIndexes"]) == (8, 2)
    assert (unlimited["writeUnitsTables"], unlimited["writeUnitsIndexes"]) == (0, 0)
    assert (limited["readUnits"], unlimited["readUnits"]) == (1.5, 1.0)


def test_the_price_follows_the_price_table() -> None:
    prices = load_prices()
    priced = budgets.estimate(prices)

    expected = (
        prices.cost("dynamodbWriteRequestUnit", 10) + prices.cost("dynamodbReadRequestUnit", 1.5)
    ) * 1e6
    assert priced["usdPerMillionJobs"]["withLimit"] == pytest.approx(expected, abs=0.01)


def test_the_section_goes_before_the_method_notes_and_replaces_an_earlier_one() -> None:
    section = budget_section(budgets.estimate(load_prices()))
    report = "# r\n\n### Live updates\n\ntext\n\n### How these numbers are made\n\n- notes\n"

    once = budgets.splice(report, section)
    twice = budgets.splice(once, section)

    assert once == twice
    assert once.index("### Live updates") < once.index(budgets.SECTION) < once.index(budgets.NEXT_SECTION)
    assert "| with a limit | 8 | 2 | 1.5 |" in once
