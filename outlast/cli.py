"""`outlast`: one command line for users (submit, status, ..., budget) and operators (local, dlq,
jobs, budgets)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from outlast.commands import budgets, dlq, jobs, local, operator_jobs, webhooks


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree."""
    parser = argparse.ArgumentParser(
        prog="outlast", description="Durable LLM jobs: client and operator tools."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    jobs.register(commands)
    dlq.register(commands)
    operator_jobs.register(commands)
    webhooks.register(commands)
    budgets.register(commands)
    local.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit code says how it went."""
    parser = build_parser()
    arguments = parser.parse_args(argv)
    code: int = arguments.run(arguments)
    return code


if __name__ == "__main__":
    sys.exit(main())
