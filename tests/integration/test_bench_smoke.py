"""`make bench`'s cost, worker and long-input benchmarks, run with tiny sizes: the report's shape,
never its speed.

The benchmark runs in a child process (`python -m outlast.bench --smoke`) because it replaces
stdout, hooks boto3's default session and imports the handlers against its own moto: none of
that may leak into the rest of the test session.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from outlast.bench.prices import load_prices

pytestmark = pytest.mark.integration

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    out_dir = tmp_path_factory.mktemp("bench")
    completed = subprocess.run(  # noqa: S603 - our own module
        [
            sys.executable,
            "-m",
            "outlast.bench",
            "--smoke",
            "--only",
            "worker,cost,longinput",
            "--out-dir",
            str(out_dir),
        ],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads((out_dir / "benchmarks.json").read_text()), (out_dir / "benchmarks.md").read_text()


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and value > 0


def test_cost_section_prices_a_job_for_each_design(report: tuple[dict[str, Any], str]) -> None:
    # Given a smoke run of the cost benchmark
    document, _ = report
    # When its section is read
    cost = document["cost"]
    # Then the headline and every design carry a positive price per million jobs
    assert _positive(cost["per_million_jobs_usd"])
    for design in ("httpApi", "httpApiQuiet", "restApi", "stepFunctionsStandard"):
        assert _positive(cost["designs"][design]["usdPerMillionJobs"]), design
        assert cost["designs"][design]["lines"], design
    # And the per-job quantities behind them are present and positive
    per_job = cost["perJob"]
    for key in (
        "apiRequests",
        "writeUnitsTables",
        "writeUnitsIndexes",
        "readUnits",
        "sqsRequests",
        "logBytes",
    ):
        assert _positive(per_job[key]), key
    assert per_job["dynamodb"], "no DynamoDB step recorded"
    assert per_job["reportedByMoto"], "moto's ReturnConsumedCapacity answers not recorded"
    assert _positive(cost["modelWait"]["usdPerMillionJobsPerSecondOfWait"])
    assert _positive(cost["fixedMonthly"]["totalUsdPerMonth"])
    assert cost["priceTable"]["asOf"]


def test_cost_counts_lambda_logs_and_traces_as_the_template_configures_them(
    report: tuple[dict[str, Any], str],
) -> None:
    # Given a smoke run of the cost benchmark against the synthesized template
    document, _ = report
    per_job = document["cost"]["perJob"]
    logs = per_job["logs"]
    # Then Lambda's START/END/REPORT lines count for nothing at system log level WARN
    assert set(logs["systemLogLevels"].values()) == {"WARN"}
    assert logs["platformBytesPerJob"] == 0
    # And only the traced functions' invocations are traces (the API functions do not trace)
    assert logs["traced"] == ["notifier", "relay", "sweeper", "worker"]
    (xray,) = [ln for ln in document["cost"]["designs"]["httpApi"]["lines"] if ln["service"] == "X-Ray"]
    traced = sum(count for name, count in per_job["invocations"].items() if name in logs["traced"])
    assert xray["quantityPerJob"] == pytest.approx(round(traced * 0.05, 4), abs=0.01)


def test_worker_section_reports_a_concurrency_ratio(report: tuple[dict[str, Any], str]) -> None:
    # Given a smoke run of the worker benchmark
    document, _ = report
    # When its section is read
    worker = document["worker"]
    # Then the ratio and the timings it comes from are positive numbers
    assert _positive(worker["concurrency_ratio"])
    assert _positive(worker["singleJobSeconds"]["median"])
    assert _positive(worker["batchSeconds"]["median"])
    assert worker["run"]["machineBefore"]["cpuCount"]


def test_markdown_report_has_the_sections_that_ran(report: tuple[dict[str, Any], str]) -> None:
    # Given a smoke run of the cost and worker benchmarks
    _, markdown = report
    # Then the markdown report carries both sections and the headline
    for heading in ("## Headline", "## 1. Cost per job", "## 2. Worker concurrency"):
        assert heading in markdown


def test_committed_price_table_names_a_source_for_every_price() -> None:
    # Given the committed price table
    prices = load_prices()
    # Then it is dated, and every price is non-negative with its source page named
    assert prices.as_of
    assert prices.prices
    for price in prices.prices.values():
        assert price.usd >= 0
        assert price.source.strip()


def test_long_input_section_counts_steps_calls_and_units(report: tuple[dict[str, Any], str]) -> None:
    # Given a smoke run of the long-input benchmark (a smaller document than 1 MiB, in steps)
    document, markdown = report
    section = document["longinput"]
    # Then it ran in several steps, one model call each, and counted what they wrote
    assert section["steps"] > 1
    assert section["modelCalls"] == section["steps"] == section["timing"]["modelCalls"]
    assert _positive(section["writeUnits"]["tables"])
    assert any(row["item"] == "JOB/STEP" for row in section["dynamodb"])
    assert _positive(section["usdPerJob"])
    assert "A 1 MiB summarize in steps" in markdown
