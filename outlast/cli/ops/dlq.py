"""`outlast ops dlq list | redrive`: the dead-letter queues (docs/runbook.md#dlq-not-empty)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from outlast.cli.framework import Section, Verb
from outlast.cli.ops.common import (
    AWS_ERROR,
    codes,
    hold_option,
    json_flag,
    max_messages_option,
    run,
    target_options,
)
from outlast.cli.session import guarded

dlq = Section("dlq", help="The dead-letter queues: list, redrive, purge poison.")


def _queue_options[F: Callable[..., Any]](function: F) -> F:
    function = max_messages_option(function)
    return click.option(
        "--queue",
        type=click.Choice(["jobs", "isolation"]),
        default="jobs",
        show_default=True,
        help="whose DLQ: the jobs queue's or the isolation queue's",
    )(function)


@dlq.command(
    "list",
    cls=Verb,
    exit_codes=codes(OK="the DLQ was read (empty or not)", ERROR=AWS_ERROR),
    epilog="Reading the DLQ receives every message and releases it at once: each message's "
    "ApproximateReceiveCount goes up by one per read. The DLQ has no redrive policy, so that moves "
    "nothing. The last column says what `outlast ops dlq redrive --all` would do (docs/runbook.md).",
    examples=("outlast ops dlq list --stack-name outlast-prod", "outlast ops dlq list --local --json"),
)
@target_options
@_queue_options
@json_flag
@guarded
def list_messages(**options: Any) -> int:
    """List every DLQ message joined with its job."""
    return run("dlq", "list_messages", options)


REDRIVE_ACTIONS = """\
Actions (the plan; --dry-run prints it and changes nothing): redrive (Failed -> Pending, re-sent),
recover (stuck Running, lease expired -> Pending), redispatch (stuck Pending), drop-succeeded,
drop-canceled, drop-duplicate, purge-poison (no job behind the message, with --purge-poison),
poison-purge-candidate (kept), needs-force (a reason a re-run does not fix, or the stage's
maxCrashes-th crash: fix it, then --force), skip (a worker holds it, a cancel is under way, or
it is backing off). Each write is conditional on the job as the plan read it; safe to interrupt
and to rerun. The stage's dispatchGraceSeconds and maxCrashes come from the stack itself."""


@dlq.command(
    "redrive",
    cls=Verb,
    exit_codes=codes(
        OK="every selected message was handled as planned",
        FAILED="some selected messages were kept (needs-force, poison, skip, changed, failed), or a "
        "--job-id/--message-id matched no DLQ message (--dry-run: as the run would exit)",
        ERROR=AWS_ERROR + " before anything changed",
        INTERRUPTED="interrupted: what was done is printed; every message not handled was released",
    ),
    epilog=REDRIVE_ACTIONS,
    examples=(
        "outlast ops dlq redrive --all --dry-run",
        "outlast ops dlq redrive --error-code retries_exhausted",
        "outlast ops dlq redrive --job-id 3f0c... --force",
    ),
)
@target_options
@click.option("--job-id", "job_id", multiple=True, metavar="ID", help="the messages of this job (repeatable)")
@click.option("--message-id", "message_id", multiple=True, metavar="ID", help="this DLQ message (repeatable)")
@click.option(
    "--error-code",
    "error_code",
    multiple=True,
    metavar="CODE",
    help="the messages of jobs Failed with this code",
)
@click.option("--all", "all", is_flag=True, help="every message")
@click.option("--purge-poison", is_flag=True, help="delete poison messages (no job behind them)")
@click.option("--force", is_flag=True, help="also redrive jobs Failed for a terminal reason")
@click.option("--dry-run", is_flag=True, help="print the plan and change nothing")
@hold_option
@_queue_options
@json_flag
@guarded
def redrive_messages(**options: Any) -> int:
    """Redrive DLQ messages: each job is checked and moved under a conditional write."""
    return run("dlq", "redrive_messages", options)
