"""`make bench`'s cost, worker, long-input and cold-start benchmarks, run with tiny sizes: the
report's shape, never its speed.

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
            "worker,cost,longinput,tokens,coldstart,ingest,documentsubmit",
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


def test_cost_prices_provisioned_capacity_beside_on_demand(report: tuple[dict[str, Any], str]) -> None:
    # Given a smoke run of the cost benchmark
    document, markdown = report
    cost = document["cost"]
    provisioned = cost["provisioned"]
    per_job = cost["perJob"]
    # Then the provisioned figure is its own design, and the headline stays the on-demand one
    assert provisioned["per_million_jobs_usd"] == cost["designs"]["httpApiProvisioned"]["usdPerMillionJobs"]
    assert cost["per_million_jobs_usd"] == cost["designs"]["httpApi"]["usdPerMillionJobs"]
    assert provisioned["targetUtilisation"] == 0.7
    # And its capacity-unit-hours are the job's request units over an hour's seconds at 70%
    units = per_job["writeUnitsTables"] + per_job["writeUnitsIndexes"]
    assert provisioned["capacityUnitHoursPerJob"]["write"] == pytest.approx(units / 3600 / 0.7, rel=1e-3)
    assert provisioned["capacityUnitHoursPerJob"]["read"] == pytest.approx(
        per_job["readUnits"] / 3600 / 0.7, rel=1e-3
    )
    # And only the DynamoDB lines differ from on demand: capacity-hours instead of request units
    on_demand = {ln["item"]: ln for ln in cost["designs"]["httpApi"]["lines"]}
    capacity = {ln["item"]: ln for ln in cost["designs"]["httpApiProvisioned"]["lines"]}
    assert {ln["price"] for ln in capacity.values() if ln["service"] == "DynamoDB"} == {
        "dynamodbWriteCapacityUnitHour",
        "dynamodbReadCapacityUnitHour",
    }
    assert {k: v for k, v in capacity.items() if v["service"] != "DynamoDB"} == {
        k: v for k, v in on_demand.items() if v["service"] != "DynamoDB"
    }
    dynamo = provisioned["dynamodbUsdPerMillionJobs"]
    assert 0 < dynamo["provisioned"] < dynamo["onDemand"]
    # And the idle floor of provisioned capacity is stated (9 scaled tables, the running slots' and
    # the open batches' included, and 5 indexes)
    assert provisioned["fixedMonthly"]["scaledResources"] == 14
    assert _positive(provisioned["fixedMonthly"]["totalUsdPerMonth"])
    assert "Provisioned capacity (`billingMode=provisioned`)" in markdown


def test_cost_counts_lambda_init_at_the_stated_cold_start_share(report: tuple[dict[str, Any], str]) -> None:
    # Given a smoke run of the cost and cold-start benchmarks
    document, markdown = report
    cost = document["cost"]
    cold = cost["coldStarts"]
    measured = document["coldstart"]["functions"]
    # Then the cost priced INIT from this run's cold-start figures, at 1 cold start per 100 invocations
    assert cold["invocationsPerColdStart"] == 100
    assert cold["extraMsPerColdStart"] == {
        name: data["coldExtraMs"]["median"] for name, data in sorted(measured.items())
    }
    # And each design carries one INIT line per function it invokes, in GB-seconds at that share
    for name, design in cost["designs"].items():
        init = {ln["item"].split(" ")[1]: ln for ln in design["lines"] if ln["item"].startswith("INIT: ")}
        assert set(init) == set(design["invocationsPerJob"]), name
        for function, line in init.items():
            expected = (
                design["invocationsPerJob"][function]
                / 100
                * cold["extraMsPerColdStart"][function]
                / 1000
                * cost["memoryMb"][function]
                / 1024
            )
            assert line["quantityPerJob"] == pytest.approx(expected, abs=1e-6), (name, function)
        total = sum(ln["usdPerMillionJobs"] for ln in design["lines"])
        assert design["usdPerMillionJobs"] == pytest.approx(total, abs=0.01), name
    assert _positive(cold["usdPerMillionJobs"])
    assert "sweeperInit" in cost["fixedMonthly"]["usdPerMonth"]
    assert "### Lambda INIT (cold starts)" in markdown


def test_cold_start_section_splits_init_from_the_first_invocation(report: tuple[dict[str, Any], str]) -> None:
    # Given a smoke run of the cold-start benchmark
    document, markdown = report
    section = document["coldstart"]
    # Then every function (and the baseline) reports each phase, and what a cold start adds
    for name, data in {"baseline": section["baseline"], **section["functions"]}.items():
        for key in (
            "spawnToAnswerMs",
            "interpreterStartMs",
            "importMs",
            "compositionMs",
            "firstInvokeMs",
            "warmInvokeMs",
            "coldExtraMs",
        ):
            assert _positive(data[key]["median"]), (name, key)
        # And what it adds is at least its INIT (interpreter start and import) plus the composition
        assert data["coldExtraMs"]["median"] >= data["initMs"]["median"], name
    assert set(section["functions"]) == {"submit", "status", "relay", "worker", "sweeper"}
    assert "## 3. Cold start" in markdown


def test_cold_start_section_measures_each_designs_floor(report: tuple[dict[str, Any], str]) -> None:
    # Given a smoke run of the cold-start benchmark
    document, markdown = report
    floors = document["coldstart"]["floors"]
    # Then both floors were measured like the functions, their ratio to the same baseline
    assert set(floors) == {"apiFloor", "workerFloor"}
    for name, data in floors.items():
        assert _positive(data["spawnToAnswerMs"]["median"]), name
        assert data["ratioToBaseline"] > 0, name
    # And the report names them, with their libraries at the versions measured
    assert "| floor: API design" in markdown
    assert "| floor: worker design" in markdown
    assert set(floors["workerFloor"]["libraries"]) >= {"openai", "aws-lambda-powertools"}
    # ... and holds each function with a target to it, measured in the same run
    functions = document["coldstart"]["functions"]
    for name, reference in {"submit": "apiFloor", "status": "apiFloor", "worker": "workerFloor"}.items():
        target = functions[name]["target"]
        assert target["reference"] == reference
        spawn = functions[name]["spawnToAnswerMs"]["median"] / floors[reference]["spawnToAnswerMs"]["median"]
        assert target["ratio"] == pytest.approx(spawn, abs=0.01)
        assert f"{name} {functions[name]['ratioToBaseline']}x = {target['ratio']}x the" in markdown
    assert functions["relay"]["target"]["reference"] == "baseline"
    assert "target" not in functions["sweeper"]


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
    assert logs["traced"] == [
        "batch_poller",
        "batcher",
        "ingest",
        "notifier",
        "output_pusher",
        "relay",
        "sweeper",
        "webhook_sender",
        "worker",
    ]
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


def test_ingest_section_times_a_pdf_per_page_and_per_megabyte(report: tuple[dict[str, Any], str]) -> None:
    # Given a smoke run of the ingest benchmark (a 3-page PDF, one extraction)
    document, markdown = report
    section = document["ingest"]
    # Then the PDF's pages were all read, and its time is given per page and per MB
    assert section["pdf"]["pages"] == 3
    assert _positive(section["pdf"]["textBytes"])
    assert _positive(section["pdf"]["msPerPage"])
    assert _positive(section["pdf"]["msPerMegabyte"])
    assert section["markdown"]["bytes"] > 8_000_000
    assert "Ingest: a document's text" in markdown


def test_document_submit_section_times_a_submit_on_a_document_beside_inline_text(
    report: tuple[dict[str, Any], str],
) -> None:
    # Given a smoke run of the document submit benchmark (a small document, one pair of submits)
    document, markdown = report
    section = document["documentsubmit"]
    # Then both submits were accepted and timed, the document's by its size
    assert section["document"]["seconds"]["n"] == section["inline"]["seconds"]["n"] == 1
    assert section["document"]["bytes"] > 50_000
    assert "Submit on a document" in markdown


def test_token_section_prices_the_reference_workload_per_tier(report: tuple[dict[str, Any], str]) -> None:
    # Given a smoke run of the token bill (a shrunk reference workload; its second run repeats prompts)
    document, markdown = report
    section = document["tokens"]
    # Then its tokens were measured, part of its input came from the prompt cache, and every
    # model/tier pair of the price table is priced, flex below standard
    assert _positive(section["perJob"]["inputTokens"])
    assert 0 < section["cachedShare"] < 1
    rows = {(row["model"], row["tier"]): row for row in section["tiers"]}
    assert ("gpt-4o-mini", "standard") in rows
    flex, standard = rows[("gpt-5-mini", "flex")], rows[("gpt-5-mini", "standard")]
    assert 0 < flex["tokenUsdPer1000Jobs"] < standard["tokenUsdPer1000Jobs"]
    assert flex["tokenUsdPer1000Jobs"] <= flex["tokenUsdPer1000JobsWithoutCache"]
    assert flex["waitGbSecondsPerJob"] > standard["waitGbSecondsPerJob"] > 0
    assert flex["tokensFrom"] == standard["tokensFrom"] == "standard run"
    assert "## The token bill" in markdown


def test_token_section_runs_the_workload_through_the_batch_tier(report: tuple[dict[str, Any], str]) -> None:
    # Given a smoke run of the token bill, whose workload also ran at the batch tier (issue 28)
    document, markdown = report
    section = document["tokens"]
    run = section["batch"]
    # Then every job went through worker, batcher, the local Batch API and poller, and succeeded
    # with usage at the batch tier, each of the three functions' handler time measured
    assert run["jobs"] == section["jobs"]
    assert run["usageTiers"] == {"batch": run["jobs"]}
    assert run["waitingForSeen"] > 0
    assert set(run["handlers"]) == {"worker", "batcher", "batch_poller"}
    assert all(spent["invocations"] > 0 for spent in run["handlers"].values())
    # And it used the standard run's tokens (its documents differ from those in one letter a line)
    # at half the price: the token aim is met; the Lambda-time verdicts are given, met or not
    assert run["perJob"] == section["perJob"]
    assert run["aims"]["tokenUsd"]["verdict"] == "met"
    # And no worker waited on a model call: every call went into a provider batch
    assert run["workerModelCalls"] == 0
    assert run["aims"]["modelWaitGbSeconds"]["verdict"] == "met"
    assert {aim["verdict"] for aim in run["aims"].values()} <= {"met", "missed"}
    # And the batch rows are that run's, as the report says
    batch = {(row["model"], row["tier"]): row for row in section["tiers"]}[("gpt-5-mini", "batch")]
    assert (batch["tokensFrom"], batch["waitFrom"]) == ("batch run", "measured worker time")
    assert "### The batch tier, measured" in markdown
