"""The cold-start targets of DESIGN.md ("Cost discipline", restated): each function against its
design's floor, or the relay against the bare baseline, measured in the same run; a miss is flagged."""

from __future__ import annotations

from typing import Any

from outlast.bench.coldstart import BASELINE, TARGETS, ColdStartTarget, target_verdict
from outlast.bench.report import markdown


def test_the_targets_are_each_designs_floor_with_its_margin_and_the_relay_against_the_baseline() -> None:
    expected = {
        "submit": ColdStartTarget("apiFloor", 1.25),
        "status": ColdStartTarget("apiFloor", 1.25),
        "worker": ColdStartTarget("workerFloor", 1.35),
        "relay": ColdStartTarget(BASELINE, 1.3),
    }
    assert expected == TARGETS


def test_a_target_is_met_at_its_factor_and_missed_above_it() -> None:
    assert target_verdict(TARGETS["submit"], 500.0, 400.0) == {
        "reference": "apiFloor",
        "factor": 1.25,
        "ratio": 1.25,
        "met": True,
    }
    assert target_verdict(TARGETS["submit"], 504.0, 400.0)["met"] is False
    assert target_verdict(TARGETS["relay"], 260.0, 200.0)["met"] is True
    # The CPU ratio rides beside the verdict, which stays the spawn-to-answer one
    assert target_verdict(TARGETS["worker"], 700.0, 500.0, cpu_ratio=1.123) == {
        "reference": "workerFloor",
        "factor": 1.35,
        "ratio": 1.4,
        "met": False,
        "cpuRatio": 1.12,
    }


def _stats(median: float) -> dict[str, Any]:
    return {"n": 7, "median": median, "min": median, "max": median}


def _entry(median_ms: float, ratio: float, target: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        key: _stats(median_ms)
        for key in ("spawnToAnswerMs", "interpreterStartMs", "importMs", "firstInvokeMs", "initMs")
    }
    entry["ratioToBaseline"] = ratio
    if target is not None:
        entry["target"] = target
    return entry


def _section(worker_ms: float) -> dict[str, Any]:
    baseline, api_floor, worker_floor = 200.0, 300.0, 600.0

    def against(name: str, median_ms: float, reference_ms: float) -> dict[str, Any]:
        return _entry(
            median_ms, round(median_ms / baseline, 2), target_verdict(TARGETS[name], median_ms, reference_ms)
        )

    return {
        "runsPerFunction": 7,
        "method": "a test",
        "baseline": _entry(baseline, 1.0),
        "floors": {
            "apiFloor": _entry(api_floor, 1.5) | {"libraries": {"pydantic": "2.0"}},
            "workerFloor": _entry(worker_floor, 3.0) | {"libraries": {"openai": "3.0"}},
        },
        "functions": {
            "submit": against("submit", 360.0, api_floor),
            "status": against("status", 330.0, api_floor),
            "relay": against("relay", 240.0, baseline),
            "worker": against("worker", worker_ms, worker_floor),
            "sweeper": _entry(400.0, 2.0),
        },
    }


def test_the_report_says_each_functions_ratio_to_its_floor_and_that_every_target_was_met() -> None:
    report = markdown({"coldstart": _section(worker_ms=780.0)})

    assert "submit 1.8x = 1.2x the API floor (target at most 1.25x: met)" in report
    assert "worker 3.9x = 1.3x the worker floor (target at most 1.35x: met)" in report
    assert "relay 1.2x (target at most 1.3x the baseline: met)" in report
    assert "Every target was met in this run." in report
    assert "missed" not in report
    assert "pydantic 2.0" in report  # the floors' libraries, at the versions measured


def test_the_report_flags_a_missed_target() -> None:
    report = markdown({"coldstart": _section(worker_ms=840.0)})

    assert "**Cold-start target missed: worker 1.4x the worker floor (target 1.35x).**" in report
    assert "**Targets missed in this run: worker 1.4x the worker floor (target 1.35x).**" in report
    assert "at most 1.35x the worker floor: 1.4x, **missed**" in report
