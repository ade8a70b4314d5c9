"""Small statistics for noisy timings, and a description of the machine they were taken on."""

from __future__ import annotations

import math
import os
import platform
import statistics
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The `fraction` percentile (0..1), linear between closest ranks."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    position = (len(ordered) - 1) * fraction
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(samples: Sequence[float], digits: int = 4) -> dict[str, Any]:
    """Median and spread: what a noisy measurement can honestly claim."""
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "median": round(statistics.median(samples), digits),
        "min": round(min(samples), digits),
        "max": round(max(samples), digits),
        "p25": round(percentile(samples, 0.25), digits),
        "p75": round(percentile(samples, 0.75), digits),
    }


def latency_summary(samples: Sequence[float], digits: int = 4) -> dict[str, Any]:
    """Percentiles for a latency distribution."""
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "p50": round(percentile(samples, 0.50), digits),
        "p90": round(percentile(samples, 0.90), digits),
        "p99": round(percentile(samples, 0.99), digits),
        "max": round(max(samples), digits),
        "mean": round(statistics.fmean(samples), digits),
    }


def load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """CPU count, load and versions: the context every timing below needs."""
    affinity = getattr(os, "sched_getaffinity", None)
    return {
        "cpuCount": os.cpu_count(),
        "cpusAvailable": len(affinity(0)) if affinity else os.cpu_count(),
        "loadAverage": load_average(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "packages": {
            name: _version(name) for name in ("moto", "boto3", "aws-lambda-powertools", "openai", "pydantic")
        },
    }
