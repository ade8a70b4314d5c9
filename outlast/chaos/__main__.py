"""`python -m outlast.chaos` (`make chaos JOBS=300 SEED=7`): a chaos run, its table, its exit code."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from outlast.chaos.driver import DriverOptions
from outlast.chaos.report import render
from outlast.chaos.runner import run_chaos


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # noqa: T201 - progress of a command-line run


def parse(argv: Sequence[str] | None = None) -> tuple[DriverOptions, Path | None]:
    """Options from the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m outlast.chaos",
        description="Drive jobs through the local stack while injecting faults at every boundary.",
    )
    defaults = DriverOptions()
    parser.add_argument("--jobs", type=int, default=defaults.jobs, help="jobs to submit (default 300)")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="seed of the fault plan (default 7)")
    parser.add_argument(
        "--port", type=int, help="attach to `outlast local up --chaos ...` on this port (default: start one)"
    )
    parser.add_argument("--cdk-out", type=Path, default=defaults.cdk_out, help="cloud assembly directory")
    parser.add_argument(
        "--concurrency", type=int, default=defaults.concurrency, help="concurrent clients (default 4)"
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=defaults.drain_timeout,
        help="seconds after the last accepted submit for every job to end (default 300)",
    )
    parser.add_argument("--run-id", help="names users, keys and texts (default: random)")
    parser.add_argument("--json-out", type=Path, help="also write the report as JSON here")
    arguments = parser.parse_args(argv)
    if arguments.jobs < 1 or arguments.concurrency < 1:
        parser.error("--jobs and --concurrency must be at least 1")
    options = DriverOptions(
        jobs=arguments.jobs,
        seed=arguments.seed,
        port=arguments.port,
        cdk_out=arguments.cdk_out,
        concurrency=arguments.concurrency,
        drain_timeout=arguments.drain_timeout,
        run_id=arguments.run_id,
        log=_progress,
    )
    return options, arguments.json_out


def main(argv: Sequence[str] | None = None) -> int:
    """Run, print the table, exit 1 on any loss, duplicate, leak or broken invariant."""
    options, json_out = parse(argv)
    report = run_chaos(options)
    print(render(report), flush=True)  # noqa: T201 - the table is the command's output
    if json_out is not None:
        json_out.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
