"""`python -m outlast.bench [--quick] [--only SECTION,...]`: run the benchmarks, then report.

Sections not run this time are kept from the existing docs/benchmarks.json, so `--only` refreshes
one section without losing the others (each section carries when and how it was made).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from outlast.bench import report
from outlast.bench.stats import load_average, machine
from outlast.local.synth import PROJECT_ROOT

SECTIONS = (
    "worker",
    "cost",
    "longinput",
    "tokens",
    "coldstart",
    "pipeline",
    "streaming",
    "ingest",
    "documentsubmit",
    "noisy",
)
# Sections that start a whole local stack of their own (the others share the in-process harness).
STACK_SECTIONS = ("pipeline", "streaming", "noisy")
# Sections that need neither the harness nor a stack (the ingest's extraction, in its own child).
PLAIN_SECTIONS = ("ingest",)


@dataclass(frozen=True)
class Sizes:
    """How much each benchmark does."""

    cost_batch: int
    cost_timing_repeats: int
    worker_batch: int
    worker_delay_seconds: float
    worker_repeats: int
    coldstart_runs: int
    pipeline_points: tuple[int, ...]
    pipeline_jobs: int
    pipeline_clients: int
    long_input_bytes: int
    streaming_jobs: int
    noisy_a_jobs: int  # the flooding tenant's jobs
    noisy_b_jobs: int  # the quiet tenant's, alone and under the flood
    ingest_pages: int = 300
    ingest_repeats: int = 5
    document_submit_repeats: int = 5
    document_submit_bytes: int = 8 * 1024 * 1024 - 1024
    tokens_smoke: bool = False  # the token bill's reference workload, shrunk (outlast.bench.tokens)


FULL = Sizes(10, 3, 10, 2.0, 5, 7, (1000, 10000), 240, 16, 1_048_576, 40, 500, 20)
QUICK = Sizes(
    10,
    1,
    10,
    2.0,
    2,
    3,
    (100, 1000),
    48,
    8,
    1_048_576,
    10,
    150,
    10,
    ingest_repeats=2,
    document_submit_repeats=2,
)
# For the test suite: the code paths with tiny sizes; the numbers mean nothing.
SMOKE = Sizes(
    2,
    1,
    3,
    0.2,
    1,
    1,
    (10, 20),
    4,
    2,
    60_000,
    2,
    4,
    2,
    ingest_pages=3,
    ingest_repeats=1,
    document_submit_repeats=1,
    document_submit_bytes=100_000,
    tokens_smoke=True,
)


def _say(line: str) -> None:
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {line}\n")
    sys.stderr.flush()


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m outlast.bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short run: fewer repeats, smaller tables")
    parser.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated sections (default: {','.join(SECTIONS)})"
    )
    parser.add_argument("--out-dir", type=Path, default=PROJECT_ROOT / "docs", help="where the report goes")
    parser.add_argument(
        "--invocations-per-cold-start",
        type=int,
        default=100,
        metavar="N",
        help="the cold-start share the cost prices INIT at: 1 cold start per N invocations (default 100; "
        "AWS: under 1%% of invocations)",
    )
    arguments = parser.parse_args(argv)
    arguments.sections = [s.strip() for s in arguments.only.split(",") if s.strip()]
    unknown = set(arguments.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    if arguments.invocations_per_cold_start < 1:
        parser.error("--invocations-per-cold-start must be at least 1")
    return arguments


def _in_process(sections: list[str], sizes: Sizes, previous: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The benchmarks that share one in-process harness (moto, the model server, the handlers)."""
    from outlast.bench import (  # noqa: PLC0415 - after argument parsing
        coldstart,
        cost,
        document_submit,
        longinput,
        tokens,
        worker,
    )
    from outlast.bench.harness import Harness  # noqa: PLC0415
    from outlast.bench.prices import load_prices  # noqa: PLC0415

    results: dict[str, dict[str, Any]] = {}
    harness = Harness(log=_say).start()
    try:
        if "worker" in sections:
            results["worker"] = worker.run(
                harness,
                batch=sizes.worker_batch,
                delay_seconds=sizes.worker_delay_seconds,
                repeats=sizes.worker_repeats,
                say=_say,
            )
        if "cost" in sections:
            ratio = results.get("worker", previous.get("worker", {})).get("concurrency_ratio")
            results["cost"] = cost.run(
                harness,
                load_prices(),
                batch=sizes.cost_batch,
                timing_repeats=sizes.cost_timing_repeats,
                concurrency_ratio=ratio,
                say=_say,
            )
        if "longinput" in sections:
            results["longinput"] = longinput.run(
                harness, load_prices(), max_bytes=sizes.long_input_bytes, delay_seconds=1.0, say=_say
            )
        if "tokens" in sections:
            workload = tokens.SMOKE_REFERENCE if sizes.tokens_smoke else tokens.REFERENCE
            results["tokens"] = tokens.run(harness, load_prices(), workload=workload, say=_say)
        if "coldstart" in sections:
            results["coldstart"] = coldstart.run(harness, runs=sizes.coldstart_runs, say=_say)
        if "documentsubmit" in sections:
            results["documentsubmit"] = document_submit.run(
                harness,
                repeats=sizes.document_submit_repeats,
                document_bytes=sizes.document_submit_bytes,
                say=_say,
            )
    finally:
        harness.stop()
    _say_denials("in-process sections", len(harness.denials.read()))
    return results


def _say_denials(where: str, count: int) -> None:
    """Every benchmark runs each function under its own role (DESIGN.md, "Deploy fidelity")."""
    _say(f"{where}: calls the functions' roles denied (IAM, must be 0): {count}")


def _price_cold_starts(document: dict[str, Any], every: int) -> None:
    """Price INIT in the cost section from the cold-start section (of this run or the last one)."""
    cost = document.get("cost")
    if cost is None or "invocationsPerJob" not in cost["designs"]["httpApi"]:
        return  # no cost section, or one from before INIT was priced
    from outlast.bench.cost import ColdStarts, apply_cold_starts  # noqa: PLC0415 - after argument parsing
    from outlast.bench.prices import load_prices  # noqa: PLC0415

    coldstart = document.get("coldstart")
    measured = (coldstart or {}).get("run", {}).get("generatedAt", "?")
    source = f"the cold-start section of {measured}, its coldExtraMs medians"
    apply_cold_starts(cost, ColdStarts.from_section(coldstart, every, source), load_prices())


def main(argv: list[str] | None = None) -> int:
    """Run the chosen benchmarks and write docs/benchmarks.json and docs/benchmarks.md."""
    arguments = _arguments(argv)
    # Powertools warns when an invocation published no metric (a status read, say): expected here.
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    sizes = SMOKE if arguments.smoke else QUICK if arguments.quick else FULL
    variant = "smoke" if arguments.smoke else "quick" if arguments.quick else "full"
    command = "make bench" + (" BENCH_ARGS=--quick" if variant == "quick" else "")
    json_path = arguments.out_dir / "benchmarks.json"
    previous: dict[str, Any] = json.loads(json_path.read_text()) if json_path.exists() else {}
    began = time.monotonic()
    stamp: dict[str, Any] = {
        "generatedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "variant": variant,
        "command": command
        if arguments.only == ",".join(SECTIONS)
        else f"{command} BENCH_ARGS=--only={arguments.only}",
        "machineBefore": machine(),
    }
    results: dict[str, dict[str, Any]] = {}
    in_process = [s for s in arguments.sections if s not in STACK_SECTIONS + PLAIN_SECTIONS]
    if in_process:
        results.update(_in_process(in_process, sizes, previous))
    if "pipeline" in arguments.sections:
        from outlast.bench import pipeline  # noqa: PLC0415 - only this section needs it

        results["pipeline"] = pipeline.run(
            points=sizes.pipeline_points, jobs=sizes.pipeline_jobs, clients=sizes.pipeline_clients, say=_say
        )
        _say_denials("pipeline", results["pipeline"]["iamDenials"])
    if "streaming" in arguments.sections:
        from outlast.bench import streaming  # noqa: PLC0415 - only this section needs it

        results["streaming"] = streaming.run(jobs=sizes.streaming_jobs, say=_say)
        _say_denials("streaming", results["streaming"]["iamDenials"])
    if "ingest" in arguments.sections:
        from outlast.bench import ingest  # noqa: PLC0415 - only this section needs it

        results["ingest"] = ingest.run(pages=sizes.ingest_pages, repeats=sizes.ingest_repeats, say=_say)
    if "noisy" in arguments.sections:
        from outlast.bench import noisy  # noqa: PLC0415 - only this section needs it

        results["noisy"] = noisy.run(a_jobs=sizes.noisy_a_jobs, b_jobs=sizes.noisy_b_jobs, say=_say)
        _say_denials("noisy neighbour", results["noisy"]["iamDenials"])
    stamp["loadAverageAfter"] = load_average()
    stamp["seconds"] = round(time.monotonic() - began, 1)
    document = {key: value for key, value in previous.items() if key in SECTIONS}
    for name, section in results.items():
        document[name] = {**section, "run": stamp}
    _price_cold_starts(document, arguments.invocations_per_cold_start)
    document = {"note": report.JSON_NOTE, **{name: document[name] for name in SECTIONS if name in document}}
    arguments.out_dir.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(document, indent=2) + "\n")
    (arguments.out_dir / "benchmarks.md").write_text(report.markdown(document))
    _say(f"wrote {json_path} and benchmarks.md in {stamp['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
