"""`outlast ops dlq list` and `outlast ops dlq redrive`: the dead-letter queues, for on-call operators.

`--queue jobs` (the default) is the jobs queue's DLQ, `--queue isolation` the isolation queue's.
They talk to AWS directly with the operator's credentials (or to the local stack with `--local`),
never through the HTTP API. The stage's settings a redrive needs (dispatchGraceSeconds,
maxCrashes) come from the stack itself. See docs/runbook.md#dlq-not-empty.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from outlast.cli.console import Console
from outlast.cli.errors import CliError, ExitCode
from outlast.operator import plan as p
from outlast.operator.commands.plan_console import OperatorConsole
from outlast.operator.dispatch import Result
from outlast.operator.dlq import Outcome, Redrive, held_messages, join, listing, queue_depth
from outlast.operator.targets import QUEUE_CHOICES, Target, resolve
from outlast.operator.text import duration, instant
from shared.clock import SystemClock, truncate_to_millis
from shared.ids import normalize_job_id
from shared.ports import Lane

# Why a read of the DLQ stopped before it found the queue empty, other than --max-messages.
OUT_OF_TIME = (
    "stopped reading early: reading the DLQ took half the hold or more, and the messages read "
    "first would soon be visible again"
)


def now() -> datetime:
    """The operator's clock, at the precision the tables keep."""
    return truncate_to_millis(SystemClock().now())


# --- list ------------------------------------------------------------------------------------


def dlq_label(lane: Lane) -> str:
    """`jobs DLQ` or `isolation DLQ`."""
    return "isolation DLQ" if lane is Lane.ISOLATION else "jobs DLQ"


def list_messages(arguments: SimpleNamespace, console: Console) -> int:
    """`ops dlq list`: every DLQ message joined with its job, and what `redrive --all` would do."""
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
    depth = result.depth
    if console.json_mode:
        console.show(
            None,
            {
                "target": target.label,
                "queue": arguments.queue,
                "depth": _depth_document(depth),
                "limitReached": result.limit_reached,
                "timeLimitReached": result.out_of_time,
                "messages": [_step_document(step, result.now) for step in result.steps],
            },
        )
        return ExitCode.OK
    console.line(
        f"{dlq_label(lane)} of the {target.label}: {len(result.steps)} message(s) read "
        f"(queue reports {depth.visible} visible, {depth.in_flight} in flight, {depth.delayed} delayed)"
    )
    if depth.in_flight:
        console.line(
            "  messages in flight are held by another reader (an operator run?) and come back by themselves"
        )
    if result.limit_reached:
        console.line(f"  stopped at --max-messages {arguments.max_messages}: more may remain")
    if result.out_of_time:
        console.line(f"  {OUT_OF_TIME}: more may remain")
    if result.steps:
        header = ["MESSAGE ID", "JOB ID", "TENANT", "STATUS", "ERROR", "ATTEMPTS", "REDRIVES", "AGE"]
        header += ["RECEIVES", "SOURCE", "REDRIVE --all WOULD"]
        console.table(header, [_list_row(step, result.now) for step in result.steps])
        console.line("RECEIVES counts this read too. SOURCE `redrive policy`: the worker kept failing on it.")
    return ExitCode.OK


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


def error_codes(given: Sequence[str]) -> frozenset[str]:
    """--error-code values, each one of the job error codes (CliError otherwise)."""
    unknown = sorted(set(given) - p.JOB_ERROR_CODES)
    if unknown:
        raise CliError(f"--error-code {unknown[0]!r} is not one of: {', '.join(sorted(p.JOB_ERROR_CODES))}")
    return frozenset(given)


def _selection(arguments: SimpleNamespace) -> p.Selection:
    job_ids = []
    for text in arguments.job_id:
        job_id = normalize_job_id(text)
        if job_id is None:
            raise CliError(f"--job-id {text!r} is not a job id (a UUID)")
        job_ids.append(job_id)
    selection = p.Selection(
        job_ids=frozenset(job_ids),
        message_ids=frozenset(arguments.message_id),
        error_codes=error_codes(arguments.error_code),
        everything=arguments.all,
        poison=arguments.purge_poison,
    )
    if selection.empty:
        raise CliError("say which messages: --job-id, --message-id, --error-code, --all or --purge-poison")
    return selection


def redrive_messages(arguments: SimpleNamespace, output: Console) -> int:
    """`ops dlq redrive`: plan the selected messages, then act on each under a conditional write."""
    selection = _selection(arguments)
    target = resolve(arguments)
    settings = target.settings()
    lane = QUEUE_CHOICES[arguments.queue]
    options = p.PlanOptions(
        force=arguments.force, purge_poison=arguments.purge_poison, max_crashes=settings.max_crashes
    )
    console = _Console(output)
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
                return ExitCode.FAILED
            return ExitCode.OK
        redrive = Redrive(
            target.repository,
            target.payloads,
            target.queues,
            hold,
            now=now,
            grace=timedelta(seconds=settings.dispatch_grace_seconds),
            budgets=target.budgets,
        )
        try:
            redrive.run(steps, record)
        except KeyboardInterrupt:
            console.interrupted(outcomes, steps)
            console.finish(_run_document(outcomes, steps, planned_at, missing, interrupted=True))
            return ExitCode.INTERRUPTED
    console.summary(outcomes, hold.release_failures)
    console.finish(_run_document(outcomes, steps, planned_at, missing, interrupted=False))
    if missing or any(o.result is not Result.DONE for o in outcomes):
        return ExitCode.FAILED
    return ExitCode.OK


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
        arguments: SimpleNamespace,
        *,
        lane: Lane,
        read: int,
        steps: Sequence[p.Step],
        missing: Sequence[str],
        limit_reached: bool,
        out_of_time: bool,
    ) -> None:
        mode = "DRY RUN: nothing will change" if arguments.dry_run else "acting"
        self.line(f"outlast ops dlq redrive of the {dlq_label(lane)} on the {target.label} ({mode})")
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
