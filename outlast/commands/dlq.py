"""`outlast dlq list` and `outlast dlq redrive`: the dead-letter queues, for on-call operators.

`--queue jobs` (the default) is the jobs queue's DLQ, `--queue isolation` the isolation queue's.
They talk to AWS directly with the operator's credentials (or to the local stack with `--local`),
never through the HTTP API. See docs/runbook.md#dlq-not-empty.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from outlast.commands.operator_console import OperatorConsole
from outlast.operator import plan as p
from outlast.operator.dispatch import AWS_ERRORS, Result
from outlast.operator.dlq import (
    DEFAULT_HOLD_SECONDS,
    DEFAULT_MAX_MESSAGES,
    Outcome,
    Redrive,
    held_messages,
    join,
    listing,
    queue_depth,
)
from outlast.operator.targets import QUEUE_CHOICES, Target, TargetError, add_target_arguments, resolve
from outlast.operator.text import duration, instant, table
from shared.clock import SystemClock, truncate_to_millis
from shared.ids import normalize_job_id
from shared.ports import Lane

EXIT_OK = 0
EXIT_ATTENTION = 1
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

# Why a read of the DLQ stopped before it found the queue empty, other than --max-messages.
OUT_OF_TIME = (
    "stopped reading early: reading the DLQ took half the hold or more, and the messages read "
    "first would soon be visible again"
)

LIST_EPILOG = """\
exit codes:
  0    the DLQ was read (empty or not)
  2    usage error, no such target, or an AWS error (missing credentials or permissions)
  130  interrupted (every message read was released again)

Reading the DLQ receives every message and releases it at once: each message's
ApproximateReceiveCount goes up by one per read. The DLQ has no redrive policy, so that moves
nothing. The last column says what `outlast dlq redrive --all` would do (docs/runbook.md).
`--queue isolation` reads the isolation queue's DLQ instead of the jobs queue's.
"""

REDRIVE_EPILOG = """\
actions (the plan; --dry-run prints it and changes nothing):
  redrive                 Failed -> Pending (redriveCount + 1, attempts, stalls and crashes renewed,
                          isolation reset), re-sent to the jobs queue, deleted
  recover                 stuck Running (lease expired) -> Pending under its lease, settled as the
                          sweeper would (isolated), re-sent, deleted
  redispatch              stuck Pending: dispatched again now, re-sent, deleted
  drop-succeeded          the job already Succeeded: message deleted, job not re-run
  drop-canceled           the job was Canceled: message deleted, job not re-run
  drop-duplicate          another message of the run carries this job: deleted once that one went through
  purge-poison            no job behind the message (--purge-poison): deleted, never re-sent
  poison-purge-candidate  no job behind the message: kept (purge with --purge-poison)
  needs-force             Failed for a reason a re-run does not fix by itself (worker_crashed too),
                          or its maxCrashes-th crash: kept (fix the cause, then --force)
  skip                    a worker holds the job, a cancel is under way, or it is backing off: kept

Each write is conditional on the job as the plan read it; a job that moved on meanwhile is left
alone and reported as changed. Each dispatched job is sent to the queue of its lane as written: a
redriven job to the jobs queue (a redrive resets isolation), a recovered or redispatched isolated
job to the isolation queue, whichever DLQ its message came from. Safe to interrupt and to rerun:
at worst a job is already Pending while its DLQ message is still there, and the rerun sends and
deletes it.

exit codes (--dry-run exits as the run would, as far as the plan can tell: changed and failed
only show in a real run):
  0    every selected message was handled as planned
  1    some selected messages were kept (needs-force, poison, skip, changed, failed), or a
       --job-id/--message-id matched no DLQ message
  2    usage error, no such target, or an AWS error before anything changed
  130  interrupted: what was done is printed; every message not handled was released
"""


def register(commands: Any) -> None:
    """Add `dlq list` and `dlq redrive`."""
    group = commands.add_parser(
        "dlq", help="the dead-letter queues (operators; AWS credentials, not the API)"
    ).add_subparsers(dest="dlq_command", required=True, metavar="COMMAND")

    listing_parser = group.add_parser(
        "list",
        help="every DLQ message with its job",
        description="List every DLQ message joined with its job.",
        epilog=LIST_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_target_arguments(listing_parser)
    _common_arguments(listing_parser)
    listing_parser.set_defaults(run=guarded(_list))

    redrive = group.add_parser(
        "redrive",
        help="re-run, drop or purge DLQ messages",
        description="Redrive DLQ messages: each job is checked and moved under a conditional write.",
        epilog=REDRIVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_target_arguments(redrive)
    selection = redrive.add_argument_group("which messages (at least one; they add up)")
    selection.add_argument(
        "--job-id", action="append", default=[], metavar="ID", help="the messages of this job (repeatable)"
    )
    selection.add_argument(
        "--message-id", action="append", default=[], metavar="ID", help="this DLQ message (repeatable)"
    )
    selection.add_argument(
        "--error-code",
        action="append",
        default=[],
        choices=sorted(p.JOB_ERROR_CODES),
        metavar="CODE",
        help="the messages of jobs Failed with this code (repeatable): "
        + ", ".join(sorted(p.JOB_ERROR_CODES)),
    )
    selection.add_argument("--all", action="store_true", help="every message")
    redrive.add_argument(
        "--purge-poison",
        action="store_true",
        help="delete poison messages (no job behind them): alone, it selects every poison message; "
        "with other selectors, only the poison messages they select",
    )
    redrive.add_argument(
        "--force", action="store_true", help="also redrive jobs Failed for a terminal reason"
    )
    redrive.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    redrive.add_argument(
        "--hold-seconds",
        type=_positive,
        default=DEFAULT_HOLD_SECONDS,
        metavar="S",
        help=f"how long the run keeps the messages it read hidden (default {DEFAULT_HOLD_SECONDS})",
    )
    redrive.add_argument(
        "--dispatch-grace-seconds",
        type=_positive,
        default=p.DEFAULT_DISPATCH_GRACE_SECONDS,
        metavar="S",
        help="the stack's dispatchGraceSeconds: when the sweeper re-sends a redriven job whose message "
        f"was lost (default {p.DEFAULT_DISPATCH_GRACE_SECONDS})",
    )
    add_max_crashes_argument(redrive)
    _common_arguments(redrive)
    redrive.set_defaults(run=guarded(_redrive))


def add_max_crashes_argument(parser: argparse.ArgumentParser) -> None:
    """--max-crashes: the stack's maxCrashes, which decides when a recover needs --force."""
    parser.add_argument(
        "--max-crashes",
        type=_positive,
        default=p.DEFAULT_MAX_CRASHES,
        metavar="N",
        help="the stack's maxCrashes: a stuck Running job whose worker died under its N-th solo claim "
        f"is the sweeper's to fail (worker_crashed); recovering it needs --force (default "
        f"{p.DEFAULT_MAX_CRASHES})",
    )


def _common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--queue",
        choices=sorted(QUEUE_CHOICES),
        default="jobs",
        help="whose DLQ: the jobs queue's (default) or the isolation queue's",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    parser.add_argument(
        "--max-messages",
        type=_positive,
        default=DEFAULT_MAX_MESSAGES,
        metavar="N",
        help=f"read at most this many DLQ messages (default {DEFAULT_MAX_MESSAGES}); rerun for the rest",
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn target and AWS errors into a message on stderr and exit code 2, Ctrl-C into 130."""

    def guarded_run(arguments: argparse.Namespace) -> int:
        try:
            return run(arguments)
        except (TargetError, UsageError) as error:
            print(f"outlast: {error}", file=sys.stderr)
        except ClientError as error:
            details = error.response.get("Error", {})
            print(f"outlast: AWS error {details.get('Code')}: {details.get('Message')}", file=sys.stderr)
        except AWS_ERRORS as error:
            print(f"outlast: AWS error: {error}", file=sys.stderr)
        except KeyboardInterrupt:
            print("outlast: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        return EXIT_ERROR

    return guarded_run


class UsageError(Exception):
    """The command line asks for something the command cannot do."""


def now() -> datetime:
    """The operator's clock, at the precision the tables keep."""
    return truncate_to_millis(SystemClock().now())


# --- list ------------------------------------------------------------------------------------


def dlq_label(lane: Lane) -> str:
    """`jobs DLQ` or `isolation DLQ`."""
    return "isolation DLQ" if lane is Lane.ISOLATION else "jobs DLQ"


def _list(arguments: argparse.Namespace) -> int:
    target = resolve(arguments)
    lane = QUEUE_CHOICES[arguments.queue]
    result = listing(
        target.sqs,
        target.resources.dlq_url_of(lane),
        target.repository,
        now(),
        max_messages=arguments.max_messages,
        wait_seconds=target.receive_wait_seconds,
    )
    if arguments.json:
        print(
            json.dumps(
                {
                    "target": target.label,
                    "queue": arguments.queue,
                    "depth": _depth_document(result.depth),
                    "limitReached": result.limit_reached,
                    "timeLimitReached": result.out_of_time,
                    "messages": [_step_document(step, result.now) for step in result.steps],
                },
                indent=2,
            )
        )
        return EXIT_OK
    depth = result.depth
    print(
        f"{dlq_label(lane)} of the {target.label}: {len(result.steps)} message(s) read "
        f"(queue reports {depth.visible} visible, {depth.in_flight} in flight, {depth.delayed} delayed)"
    )
    if depth.in_flight:
        print(
            "  messages in flight are held by another reader (an operator run?) and come back by themselves"
        )
    if result.limit_reached:
        print(f"  stopped at --max-messages {arguments.max_messages}: more may remain")
    if result.out_of_time:
        print(f"  {OUT_OF_TIME}: more may remain")
    if result.steps:
        header = ["MESSAGE ID", "JOB ID", "TENANT", "STATUS", "ERROR", "ATTEMPTS", "REDRIVES", "AGE"]
        header += ["RECEIVES", "SOURCE", "REDRIVE --all WOULD"]
        rows = [_list_row(step, result.now) for step in result.steps]
        for line in table(header, rows):
            print(line)
        print("RECEIVES counts this read too. SOURCE `redrive policy`: the worker kept failing on it.")
    return EXIT_OK


def _list_row(step: p.Step, at: datetime) -> list[str]:
    letter, job = step.letter, step.job
    status = job.status.value if job else ("(unreadable)" if step.joined.unreadable else "-")
    return [
        letter.message_id,
        letter.job_id or "-",
        job.tenant if job else "-",
        status,
        job.error.code if job and job.error else "-",
        f"{job.attempts}/{job.max_attempts}" if job else "-",
        str(job.redrive_count) if job else "-",
        duration(at - letter.sent_at),
        str(letter.receive_count),
        letter.source,
        step.action.value,
    ]


def _depth_document(depth: Any) -> dict[str, int]:
    return {"visible": depth.visible, "inFlight": depth.in_flight, "delayed": depth.delayed}


def _step_document(step: p.Step, at: datetime) -> dict[str, Any]:
    letter, job = step.letter, step.job
    return {
        "messageId": letter.message_id,
        "jobId": letter.job_id,
        "tenant": job.tenant if job else None,
        "status": job.status.value if job else None,
        "errorCode": job.error.code if job and job.error else None,
        "attempts": job.attempts if job else None,
        "maxAttempts": job.max_attempts if job else None,
        "redriveCount": job.redrive_count if job else None,
        "ageSeconds": int((at - letter.sent_at).total_seconds()),
        "sentAt": instant(letter.sent_at),
        "receiveCount": letter.receive_count,
        "source": letter.source,
        "reason": letter.reason,
        "unreadable": step.joined.unreadable,
        "action": step.action.value,
        "why": step.why,
        "sendsTo": queue_choice(step.decision.lane),
        "warnings": list(step.warnings),
    }


def queue_choice(lane: Lane | None) -> str | None:
    """The `--queue` name of the queue a dispatching step sends to (None: it sends nothing)."""
    if lane is None:
        return None
    return next(name for name, choice in QUEUE_CHOICES.items() if choice is lane)


# --- redrive ----------------------------------------------------------------------------------


def _selection(arguments: argparse.Namespace) -> p.Selection:
    job_ids = []
    for text in arguments.job_id:
        job_id = normalize_job_id(text)
        if job_id is None:
            raise UsageError(f"--job-id {text!r} is not a job id (a UUID)")
        job_ids.append(job_id)
    selection = p.Selection(
        job_ids=frozenset(job_ids),
        message_ids=frozenset(arguments.message_id),
        error_codes=frozenset(arguments.error_code),
        everything=arguments.all,
        poison=arguments.purge_poison,
    )
    if selection.empty:
        raise UsageError("say which messages: --job-id, --message-id, --error-code, --all or --purge-poison")
    return selection


def _redrive(arguments: argparse.Namespace) -> int:
    selection = _selection(arguments)
    target = resolve(arguments)
    lane = QUEUE_CHOICES[arguments.queue]
    options = p.PlanOptions(
        force=arguments.force, purge_poison=arguments.purge_poison, max_crashes=arguments.max_crashes
    )
    console = _Console(arguments.json)
    outcomes: list[Outcome] = []

    def record(outcome: Outcome) -> None:
        outcomes.append(outcome)
        console.outcome(outcome)

    with held_messages(
        target.sqs,
        target.resources.dlq_url_of(lane),
        hold_seconds=arguments.hold_seconds,
        max_messages=arguments.max_messages,
        wait_seconds=target.receive_wait_seconds,
        monotonic=time.monotonic,
    ) as hold:
        planned_at = now()
        joined = join(hold.letters, target.repository)
        chosen = [j for j in joined if selection.selects(j, planned_at)]
        steps = p.plan(chosen, planned_at, options)
        missing = _not_found(selection, joined)
        console.header(
            target,
            arguments,
            lane=lane,
            read=len(joined),
            steps=steps,
            missing=missing,
            limit_reached=hold.limit_reached,
            out_of_time=hold.out_of_time,
        )
        if arguments.dry_run:
            console.plan(steps)
            console.finish(
                {
                    "dryRun": True,
                    "notFound": missing,
                    "steps": [_step_document(s, planned_at) for s in steps],
                }
            )
            # The exit code the run would give, so a script can check the plan before running it.
            if missing or any(step.action in p.KEEPING for step in steps):
                return EXIT_ATTENTION
            return EXIT_OK
        redrive = Redrive(
            target.repository,
            target.payloads,
            target.queues,
            hold,
            now=now,
            grace=timedelta(seconds=arguments.dispatch_grace_seconds),
            budgets=target.budgets,
        )
        try:
            redrive.run(steps, record)
        except KeyboardInterrupt:
            console.interrupted(outcomes, steps)
            console.finish(_run_document(outcomes, steps, planned_at, missing, interrupted=True))
            return EXIT_INTERRUPTED
    console.summary(outcomes, hold.release_failures)
    console.finish(_run_document(outcomes, steps, planned_at, missing, interrupted=False))
    if missing or any(o.result is not Result.DONE for o in outcomes):
        return EXIT_ATTENTION
    return EXIT_OK


def _not_found(selection: p.Selection, joined: Sequence[p.Joined]) -> list[str]:
    job_ids = {j.letter.job_id for j in joined}
    message_ids = {j.letter.message_id for j in joined}
    return sorted(
        [f"job {i}" for i in selection.job_ids if i not in job_ids]
        + [f"message {i}" for i in selection.message_ids if i not in message_ids]
    )


def _run_document(
    outcomes: Sequence[Outcome],
    steps: Sequence[p.Step],
    at: datetime,
    missing: list[str],
    *,
    interrupted: bool,
) -> dict[str, Any]:
    results = {o.step.letter.message_id: o for o in outcomes}
    documents = []
    for step in steps:
        document = _step_document(step, at)
        outcome = results.get(step.letter.message_id)
        document["result"] = outcome.result.value if outcome else "not reached"
        document["detail"] = outcome.detail if outcome else "released untouched"
        documents.append(document)
    return {"dryRun": False, "interrupted": interrupted, "notFound": missing, "steps": documents}


class _Console(OperatorConsole[p.Step]):
    """`dlq redrive`'s lines: the DLQ it read, the plan of its messages, what each did."""

    def header(
        self,
        target: Target,
        arguments: argparse.Namespace,
        *,
        lane: Lane,
        read: int,
        steps: Sequence[p.Step],
        missing: Sequence[str],
        limit_reached: bool,
        out_of_time: bool,
    ) -> None:
        mode = "DRY RUN: nothing will change" if arguments.dry_run else "acting"
        self.line(f"outlast dlq redrive of the {dlq_label(lane)} on the {target.label} ({mode})")
        self.line(
            f"read {read} message(s) from the {dlq_label(lane)}; {len(steps)} selected, "
            "the rest left exactly as they were"
        )
        if limit_reached:
            self.line(f"stopped reading at --max-messages {arguments.max_messages}: rerun for the rest")
        if out_of_time:
            self.line(f"{OUT_OF_TIME}: rerun for the rest (or raise --hold-seconds)")
        for item in missing:
            self.line(f"not on the DLQ now: {item} (in flight elsewhere, or already handled)")
        depth = queue_depth(target.sqs, target.resources.dlq_url_of(lane))
        if depth.in_flight > read:
            self.line(
                f"note: {depth.in_flight} DLQ message(s) in flight: another run may hold some; "
                "they come back when its hold ends"
            )

    def _describe(self, step: p.Step) -> None:
        job = step.job
        status = job.status.value if job else "no job"
        self.line(f"- message {step.letter.message_id}  job {step.letter.job_id or '-'}  [{status}]")
        self.line(f"    {step.action.value}: {step.why}")
        for warning in step.warnings:
            self.line(f"    warning: {warning}")

    def outcome(self, outcome: Outcome) -> None:
        step = outcome.step
        self.line(
            f"[{outcome.result.value}] message {step.letter.message_id}  job {step.letter.job_id or '-'}  "
            f"{step.action.value}: {outcome.detail}"
        )
        if outcome.result is not Result.DONE:
            self.line(f"    why: {step.why}")
        for warning in step.warnings:
            self.line(f"    warning: {warning}")

    def interrupted(self, outcomes: Sequence[Outcome], steps: Sequence[p.Step]) -> None:
        left = len(steps) - len(outcomes)
        self.line(
            f"interrupted after {len(outcomes)} of {len(steps)} step(s); the {left} not reached were "
            "released untouched. At worst a job is Pending with its DLQ message still there: rerun."
        )

    def summary(self, outcomes: Sequence[Outcome], release_failures: int) -> None:
        counts = Counter(o.result.value for o in outcomes)
        parts = [f"{counts.get(r.value, 0)} {r.value}" for r in Result]
        self.line("summary: " + ", ".join(parts))
        if release_failures:
            self.line(
                f"{release_failures} message(s) could not be released: they come back when the hold ends"
            )

    def finish(self, document: dict[str, Any]) -> None:
        if self._json:
            print(json.dumps(document, indent=2))
