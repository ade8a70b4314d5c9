"""The cost benchmark's provisioned-capacity and INIT lines: arithmetic on measured counts."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from outlast.bench.cost import ColdStarts, Quantities, apply_cold_starts, capacity_unit_hours, price_lines
from outlast.bench.prices import load_prices

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture
def cost() -> dict[str, Any]:
    section: dict[str, Any] = json.loads((DOCS / "benchmarks.json").read_text())["cost"]
    return section


def _quantities() -> Quantities:
    return Quantities(batch=10, write_units_table=8.0, write_units_index=3.0, read_units=4.0)


def test_a_capacity_unit_serves_3600_units_an_hour_at_full_use() -> None:
    assert capacity_unit_hours(3600, 1.0) == pytest.approx(1.0)
    # At 70% utilisation each consumed unit pays for 1 / 0.7 of a provisioned one
    assert capacity_unit_hours(3600, 0.7) == pytest.approx(1 / 0.7)


def test_provisioned_lines_price_capacity_hours_instead_of_request_units() -> None:
    # Given one job's counts priced on demand and provisioned at 70%
    prices = load_prices()
    on_demand = {ln.item: ln for ln in price_lines(_quantities(), prices)}
    provisioned = {ln.item: ln for ln in price_lines(_quantities(), prices, utilisation=0.7)}

    # Then only DynamoDB's lines differ, and they are the units' capacity-hours at the hourly prices
    dynamo = {k: v for k, v in provisioned.items() if v.service == "DynamoDB"}
    assert {ln.price_key for ln in dynamo.values()} == {
        "dynamodbWriteCapacityUnitHour",
        "dynamodbReadCapacityUnitHour",
    }
    writes = sum(ln.usd_per_million for ln in dynamo.values() if "write" in ln.item)
    reads = sum(ln.usd_per_million for ln in dynamo.values() if "read" in ln.item)
    assert writes == pytest.approx(11 / 3600 / 0.7 * 0.00065 * 1e6)
    assert reads == pytest.approx(4 / 3600 / 0.7 * 0.00013 * 1e6)
    assert {k: v for k, v in provisioned.items() if v.service != "DynamoDB"} == {
        k: v for k, v in on_demand.items() if v.service != "DynamoDB"
    }
    # And at these list prices provisioned capacity at 70% is cheaper per job than on demand
    assert writes + reads < sum(ln.usd_per_million for ln in on_demand.values() if ln.service == "DynamoDB")


def test_init_lines_are_priced_at_the_stated_share_and_replace_earlier_ones(cost: dict[str, Any]) -> None:
    # Given the committed cost section and what a cold start adds per function
    prices = load_prices()
    cold = ColdStarts(
        invocations_per_cold_start=50, extra_ms={"status": 500.0, "sweeper": 400.0}, source="test"
    )

    # When INIT is priced twice (as a rerun of the report would)
    apply_cold_starts(cost, cold, prices)
    once = copy.deepcopy(cost)
    apply_cold_starts(cost, cold, prices)

    # Then the second pricing changed nothing: the old INIT lines were replaced, not added to
    assert cost == once
    design = cost["designs"]["httpApi"]
    (init,) = [ln for ln in design["lines"] if ln["item"].startswith("INIT: ")]
    polls = design["invocationsPerJob"]["status"]
    gb_seconds = polls / 50 * 0.5 * cost["memoryMb"]["status"] / 1024
    assert init["quantityPerJob"] == pytest.approx(gb_seconds, abs=1e-6)
    assert init["usdPerMillionJobs"] == pytest.approx(
        prices.cost("lambdaArmGbSecond", gb_seconds) * 1e6, abs=1e-4
    )
    # And every total is the sum of its lines, the headlines included
    for name, each in cost["designs"].items():
        assert each["usdPerMillionJobs"] == pytest.approx(
            sum(ln["usdPerMillionJobs"] for ln in each["lines"]), abs=0.006
        ), name
    assert cost["per_million_jobs_usd"] == design["usdPerMillionJobs"]
    assert (
        cost["provisioned"]["per_million_jobs_usd"]
        == cost["designs"]["httpApiProvisioned"]["usdPerMillionJobs"]
    )
    assert "sweeperInit" in cost["fixedMonthly"]["usdPerMonth"]
    assert cost["coldStarts"]["invocationsPerColdStart"] == 50


def test_a_cold_start_section_without_the_figure_prices_no_init(cost: dict[str, Any]) -> None:
    # Given a cold-start section from before the phases were split (no coldExtraMs)
    cold = ColdStarts.from_section({"functions": {"status": {"ratioToBaseline": 1.7}}}, 100, "old run")

    # When INIT is priced with it
    apply_cold_starts(cost, cold, load_prices())

    # Then no design carries an INIT line, and the report says why
    assert cold.extra_ms == {}
    for design in cost["designs"].values():
        assert not [ln for ln in design["lines"] if ln["item"].startswith("INIT: ")]
    assert cost["coldStarts"]["source"].startswith("none")
    assert "sweeperInit" not in cost["fixedMonthly"]["usdPerMonth"]
