"""The push-versus-polling line: counted from the code's calls, priced with docs/prices.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from outlast.bench.prices import load_prices
from outlast.bench.push import PollCost, estimate, job_cost, session_cost

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture
def cost() -> dict[str, Any]:
    section: dict[str, Any] = json.loads((DOCS / "benchmarks.json").read_text())["cost"]
    return section


def test_the_websocket_prices_are_in_the_table() -> None:
    prices = load_prices()

    assert prices["apiGatewayWebSocketMessage"].usd == 1.0
    assert prices["apiGatewayWebSocketMessage"].per == 1_000_000
    assert prices["apiGatewayWebSocketConnectionMinute"].usd == 0.25
    assert prices["apiGatewayWebSocketConnectionMinute"].per == 1_000_000


def test_a_session_pays_started_minutes_and_pings() -> None:
    prices = load_prices()

    one = session_cost(prices, 12, 1.0)
    hour = session_cost(prices, 12, 60.0)

    minutes = prices.cost("apiGatewayWebSocketConnectionMinute", 59)
    pong = prices.cost("lambdaRequest", 1) + prices.cost("lambdaArmGbSecond", 12 / 1000 * 256 / 1024)
    pings = 12 * (prices.cost("apiGatewayWebSocketMessage", 2) + pong)
    assert hour - one == pytest.approx(minutes + pings, rel=0.01)
    assert session_cost(prices, 12, 0.5) == session_cost(prices, 12, 1.0)


def test_busy_batches_make_the_notifier_nearly_free_but_not_the_messages() -> None:
    prices = load_prices()

    assert job_cost(prices, 12, 100) < job_cost(prices, 12, 1)
    assert job_cost(prices, 12, 100) > prices.cost("apiGatewayWebSocketMessage", 3)


def test_the_committed_line_is_what_the_code_computes(cost) -> None:
    committed = cost["push"]

    assert committed == estimate(cost, load_prices())


def test_push_beats_three_polls_only_with_shared_busy_sessions(cost) -> None:
    line = estimate(cost, load_prices(), session_minutes=60, jobs_per_session=1000)

    assert line["pushUsdPerMillionJobs"]["sharedSessionBusy"] < line["pollingUsdPerMillionJobs"]
    assert line["pushUsdPerMillionJobs"]["oneSessionPerJob"] > line["pollingUsdPerMillionJobs"]
    assert line["breakEvenJobsPerSession"] > 1
    assert PollCost.from_cost(cost, load_prices()).usd > 0
