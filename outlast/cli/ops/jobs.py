"""`outlast ops jobs inspect | redrive`: operator views and moves of jobs (docs/runbook.md#jobs-redrive)."""

from __future__ import annotations

from typing import Any

import click

from outlast.cli.framework import Section, Verb
from outlast.cli.ops.common import AWS_ERROR, codes, json_flag, run, target_options
from outlast.cli.session import guarded

jobs = Section("jobs", help="Jobs as stored: inspect one, redrive Failed ones.")


@jobs.command(
    "inspect",
    cls=Verb,
    exit_codes=codes(
        OK="the job was found and shown",
        FAILED="no such job (never created, or expired and deleted)",
        ERROR=AWS_ERROR + ", or a job record this version cannot read",
    ),
    epilog="Finding the job's DLQ messages receives (and at once releases) every message on both DLQs, "
    "which raises each one's ApproximateReceiveCount by one; --no-dlq skips that. Messages on the jobs "
    "and isolation queues cannot be searched without taking them from the worker: only their depths show.",
    examples=("outlast ops jobs inspect 3f0c... --stack-name outlast-prod",),
)
@click.argument("job_id")
@target_options
@click.option("--no-dlq", is_flag=True, help="do not read the DLQs for this job's messages")
@json_flag
@guarded
def inspect(**options: Any) -> int:
    """Show one job as stored: lease, attempts, dispatch, storage and messages."""
    return run("jobs", "inspect", options)


@jobs.command(
    "redrive",
    cls=Verb,
    exit_codes=codes(
        OK="every selected job was handled as planned (none selected: nothing to do)",
        FAILED="some were left (needs-force, skip, changed, failed), or a JOB_ID named no job "
        "(--dry-run: as the run would exit)",
        ERROR=AWS_ERROR + " before anything changed",
        INTERRUPTED="interrupted: what was done is printed",
    ),
    epilog="JOB_ID... selects jobs by id, whatever their status; --error-code C --since T finds Failed "
    "jobs last written since T (an RFC 3339 instant or 90m, 2h, 1d12h) with a paginated Scan of the "
    "jobs table, billed for every item it reads. Actions as for `ops dlq redrive`; the stage's "
    "dispatchGraceSeconds and maxCrashes come from the stack itself.",
    examples=(
        "outlast ops jobs redrive --error-code retries_exhausted --since 2h --dry-run",
        "outlast ops jobs redrive 3f0c... 9a1b... --force",
    ),
)
@click.argument("job_ids", nargs=-1, metavar="[JOB_ID]...")
@target_options
@click.option(
    "--error-code",
    "error_code",
    multiple=True,
    metavar="CODE",
    help="Failed jobs with this code (needs --since)",
)
@click.option("--since", metavar="T", help="with --error-code: jobs last written at or after T")
@click.option(
    "--scan-page-size",
    type=click.IntRange(min=1),
    metavar="N",
    help="at most N items per Scan page (default: 1 MB pages), to spread a provisioned table's read units",
)
@click.option(
    "--force", is_flag=True, help="also redrive jobs Failed for any other reason than retries_exhausted"
)
@click.option("--dry-run", is_flag=True, help="print the plan and change nothing")
@json_flag
@guarded
def redrive(**options: Any) -> int:
    """Redrive jobs whose message is gone (Failed jobs), by id or by error code."""
    return run("jobs", "redrive", options)
