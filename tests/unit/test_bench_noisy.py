"""The noisy-neighbour section's arithmetic and its report (the numbers come from `make bench`)."""

from __future__ import annotations

from outlast.bench.noisy import _ratio, markdown


def _stats(p50: float, p95: float) -> dict[str, float | int]:
    return {"n": 20, "p50": p50, "p95": p95, "max": p95}


def test_the_ratios_are_flooded_over_alone() -> None:
    assert _ratio(_stats(3.0, 6.0), _stats(2.0, 2.0), "p50") == 1.5
    assert _ratio(_stats(3.0, 6.0), _stats(2.0, 2.0), "p95") == 3.0
    assert _ratio({"n": 0}, _stats(2.0, 2.0), "p50") is None


def test_the_section_reports_both_phases_and_says_whether_the_aim_is_met() -> None:
    section = {
        "aJobs": 500,
        "aUsers": 25,
        "bJobs": 20,
        "modelCallSeconds": 1.0,
        "floodSubmitSeconds": 30.0,
        "aNotEndedWhenBEnded": 400,
        "bAloneSeconds": _stats(2.0, 2.5),
        "bUnderFloodSeconds": _stats(3.0, 6.0),
        "aUnderFloodSeconds": _stats(40.0, 80.0),
        "p50Ratio": 1.5,
        "p95Ratio": 2.4,
        "ratioAim": 2.0,
        "iamDenials": 0,
    }

    text = markdown(section, "*stamp*")

    assert "| B alone | 20 | 2.00 s | 2.50 s |" in text
    assert "| B under A's flood | 20 | 3.00 s | 6.00 s |" in text
    assert "1.50x (under the 2x aim)" in text
    assert "2.40x (over the 2x aim)" in text
