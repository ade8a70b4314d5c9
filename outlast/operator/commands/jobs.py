"""`outlast ops jobs inspect JOB_ID` and `outlast ops jobs redrive`: operator views and moves of
jobs (AWS credentials, never the API).

The public API shows a caller their own status document; `inspect` shows an operator the
internal record: lease, attempts, stalls, crashes, isolation, dispatchAt, redriveCount, the
sweeper's next look, where the input and result live (and their sizes, never their text), and
where the job's messages are. `redrive` re-runs jobs whose message is gone (Failed jobs the
worker or the sweeper finished), by id or found by error code: docs/runbook.md#jobs-redrive.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from outlast.cli.console import Console
from outlast.cli.errors import CliError, ExitCode
from outlast.operator import plan as p
from outlast.operator.commands.dlq import error_codes, now, queue_choice
from outlast.operator.commands.plan_console import OperatorConsole
from outlast.operator.dispatch import Result
from outlast.operator.inspect import (
    Inspection,
    Lanes,
    Payload,
    UnreadableJobError,
    inspect_job,
    inspection_document,
    lease_prefix,
)
from outlast.operator.job_redrive import (
    FailedJobsQuery,
    Found,
    JobOutcome,
    JobsRedrive,
    JobStep,
    ScanReport,
    candidates,
    plan_jobs,
    scan_failed_jobs,
)
from outlast.operator.targets import resolve
from outlast.operator.text import duration, instant, relative
from shared.ids import normalize_job_id
from shared.job import JobRecord
from shared.ports import Lane
from shared.tiers import Tier

_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def inspect(arguments: SimpleNamespace, console: Console) -> int:
    """`ops jobs inspect`: one job as stored, with where its payloads and messages are."""
    job_id = normalize_job_id(arguments.job_id)
    if job_id is None:
        raise CliError(f"{arguments.job_id!r} is not a job id (a UUID)")
    target = resolve(arguments)
    try:
        inspection = inspect_job(target, job_id, now(), read_dlq=not arguments.no_dlq)
    except UnreadableJobError as error:
        raise CliError(f"{error}: repair it (docs/runbook.md#dlq-not-empty)") from None
    if inspection is None:
        console.note(f"no job {job_id} on the {target.label}")
        return ExitCode.FAILED
    document = {"target": target.label, **inspection_document(inspection)}
    console.show("\n".join(_lines(inspection, target.label)), document)
    return ExitCode.OK


def _lines(inspection: Inspection, label: str) -> list[str]:
    job, at = inspection.job, inspection.now
    rows = [
        ("status", job.status.value + (f" ({job.error.code}: {job.error.message})" if job.error else "")),
        ("operation", f"{job.operation.value}, model {job.model}, prompt {job.prompt_version}"),
        ("owner", f"tenant {job.tenant}, sub {job.owner}"),
        ("created", f"{instant(job.created_at)} ({relative(job.created_at, at)})"),
        ("updated", f"{instant(job.updated_at)} ({relative(job.updated_at, at)})"),
        ("expires", f"{instant(job.expires_at)} ({relative(job.expires_at, at)})"),
        ("attempts", f"{job.attempts}/{job.max_attempts}, redriveCount {job.redrive_count}"),
        ("stalls", f"{job.stalls}/{job.max_attempts} (the retry budget: claims in a row without progress)"),
        ("crashes", _crashes(job.crashes, solo=job.solo, isolated=job.isolated)),
        ("dispatchAt", f"{instant(job.dispatch_at)} ({_due(inspection)})"),
        ("lease", _lease(inspection)),
        ("cancel", instant(job.cancel_requested_at) if job.cancel_requested_at else "not requested"),
        ("tier", _tier(job)),
        ("usage", _usage(inspection)),
        ("token cost", _cost(inspection)),
        ("sweeper", _sweep(inspection)),
        ("input", _payload(inspection.input)),
        ("result", _payload(inspection.result) if inspection.result else "none"),
        (
            "plan",
            f"{job.completed_steps}/{job.total_steps} steps checkpointed ({job.plan.plan_version}, "
            f"chunkTokens {job.plan.chunk_tokens}, stepOutputTokens {job.plan.step_output_tokens})",
        ),
    ]
    lines = [f"job {job.job_id} on the {label}, as of {instant(at)}"]
    lines += [f"  {name:<{_WIDTH}} {value}" for name, value in rows]
    lines += _step_lines(inspection)
    shared, isolation = inspection.lanes[Lane.SHARED], inspection.lanes[Lane.ISOLATION]
    for name, lanes in (("DLQ", shared), ("isolation DLQ", isolation)):
        lines.append(f"  {name:<{_WIDTH}} {_dlq(lanes)}")
        lines += [f"  {'':<{_WIDTH}} message {m}" for m in _dlq_messages(lanes, at)]
    if shared.dlq_messages is not None:
        lines.append(
            f"  {'':<{_WIDTH}} (reading the DLQs raised every DLQ message's ApproximateReceiveCount by one)"
        )
    for name, lanes in (("jobs queue", shared), ("isolation queue", isolation)):
        lines.append(
            f"  {name:<{_WIDTH}} {_depth(lanes.queue_depth)}; its messages may be among them "
            "(SQS cannot be searched without receiving, which would take them from the worker)"
        )
    return lines


_WIDTH = 15


def _step_lines(inspection: Inspection) -> list[str]:
    """The plan's steps, one line each, for a job planned in more than one."""
    if inspection.steps is None:
        return [f"  {'':<{_WIDTH}} (the input is gone: its steps cannot be listed)"]
    if len(inspection.steps) <= 1:
        return []
    lines = []
    for row in inspection.steps:
        state = (
            f"checkpointed, {row.output_bytes} bytes"
            + (f", {row.usage.input_tokens} in / {row.usage.output_tokens} out tokens" if row.usage else "")
            if row.checkpointed
            else "not yet"
        )
        lines.append(f"  {'':<{_WIDTH}} {row.step_id:<8} {row.kind:<6} reads {row.reads}: {state}")
    return lines


def _usage(inspection: Inspection) -> str:
    usage = inspection.job.usage
    if usage is None:
        return "-"
    tiers = ", ".join(sorted(tier.value for tier in usage.tiers)) or "no tier recorded"
    return (
        f"{usage.input_tokens} in ({usage.cached_input_tokens} cached) / {usage.output_tokens} out tokens; "
        f"ran at {tiers}"
    )


def _cost(inspection: Inspection) -> str:
    cost = inspection.token_cost
    if cost is None:
        return (
            "-"
            if inspection.job.usage is None
            else f"{inspection.job.model} is not in docs/model-prices.json"
        )
    if cost.exact:
        return f"${cost.low:.6f} (docs/model-prices.json)"
    return (
        f"${cost.low:.6f} to ${cost.high:.6f} (its calls ran at more than one tier; docs/model-prices.json)"
    )


def _crashes(crashes: int, *, solo: bool, isolated: bool) -> str:
    where = (
        "isolated: runs alone, from the isolation queue"
        if isolated
        else "not isolated: runs in shared batches from the jobs queue"
    )
    claim = "the last claim ran alone (solo)" if solo else "the last claim shared its invocation"
    return f"{crashes} (workers it crashed running alone); {where}; {claim}"


def _due(inspection: Inspection) -> str:
    dispatch_at = inspection.job.dispatch_at
    return "due" if dispatch_at <= inspection.now else f"not due: {relative(dispatch_at, inspection.now)}"


def _lease(inspection: Inspection) -> str:
    job, at = inspection.job, inspection.now
    if job.lease_token is None and job.lease_expires_at is None:
        return "none"
    expires = job.lease_expires_at
    state = "live" if expires is not None and expires > at else "expired"
    return (
        f"token {lease_prefix(job.lease_token)}, until {instant(expires)} ({state}, {relative(expires, at)})"
    )


def _sweep(inspection: Inspection) -> str:
    if inspection.sweep is None:
        return "not watched (terminal jobs leave the sweeper's index)"
    sweep = inspection.sweep
    return f"shard {sweep.shard}, looks at it {relative(sweep.at, inspection.now)} ({instant(sweep.at)})"


def _payload(payload: Payload) -> str:
    if not payload.present:
        return f"{payload.location}: {payload.address}: GONE"
    details = "".join(f", {d}" for d in payload.details)
    return f"{payload.location}: {payload.address}: {payload.text_bytes} bytes of text{details}"


def _dlq(lanes: Lanes) -> str:
    depth = _depth(lanes.dlq_depth)
    if lanes.dlq_messages is None:
        return f"{depth}; not searched (--no-dlq)"
    found = f"{depth}; {len(lanes.dlq_messages)} of them for this job"
    if lanes.dlq_incomplete:
        found += " among those read (reading stopped early: there may be more)"
    return found


def _dlq_messages(lanes: Lanes, at: datetime) -> list[str]:
    return [
        f"{m.message_id}: {m.source}, received {m.receive_count} times, sent {duration(at - m.sent_at)} ago"
        for m in lanes.dlq_messages or []
    ]


def _depth(depth: Any) -> str:
    return f"{depth.visible} visible, {depth.in_flight} in flight, {depth.delayed} delayed"


# --- redrive ----------------------------------------------------------------------------------


def parse_since(text: str, at: datetime) -> datetime:
    """`--since`: an RFC 3339 instant with its offset, or a duration back from `at` (90m, 2h, 1d12h)."""
    match = _DURATION.fullmatch(text.strip())
    if match and any(match.groups()):
        days, hours, minutes, seconds = (int(group or 0) for group in match.groups())
        return at - timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    try:
        since = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CliError(
            f"--since {text!r} is neither an RFC 3339 instant (2026-03-01T02:00:00Z) nor a duration (2h, 90m)"
        ) from None
    if since.tzinfo is None:
        raise CliError(f"--since {text!r} has no offset: say which instant (2026-03-01T02:00:00Z)")
    return since.astimezone(UTC)


def _query(arguments: SimpleNamespace, at: datetime) -> FailedJobsQuery | None:
    if arguments.error_code and arguments.since is None:
        raise CliError("--error-code needs --since T: how far back to look for Failed jobs")
    if arguments.since is not None and not arguments.error_code:
        raise CliError("--since needs --error-code C: which Failed jobs to look for")
    if not arguments.error_code:
        return None
    return FailedJobsQuery(
        error_codes=error_codes(arguments.error_code), since=parse_since(arguments.since, at)
    )


def _job_ids(arguments: SimpleNamespace) -> list[str]:
    job_ids = []
    for text in arguments.job_ids:
        job_id = normalize_job_id(text)
        if job_id is None:
            raise CliError(f"{text!r} is not a job id (a UUID)")
        job_ids.append(job_id)
    return job_ids


def redrive(arguments: SimpleNamespace, output: Console) -> int:
    """`ops jobs redrive`: plan the selected jobs, then move each under a conditional write."""
    planned_at = now()
    job_ids = _job_ids(arguments)
    query = _query(arguments, planned_at)
    if not job_ids and query is None:
        raise CliError("say which jobs: JOB_ID... and/or --error-code C --since T")
    target = resolve(arguments)
    settings = target.settings()
    options = p.PlanOptions(force=arguments.force, max_crashes=settings.max_crashes)
    console = _RedriveConsole(output)
    console.line(
        f"outlast ops jobs redrive on the {target.label} "
        f"({'DRY RUN: nothing will change' if arguments.dry_run else 'acting'})"
    )
    found: Found | None = None
    if query is not None:
        console.scanning(query, planned_at)
        found = scan_failed_jobs(
            target.dynamodb,
            target.resources.jobs_table,
            query,
            planned_at,
            page_size=arguments.scan_page_size,
            on_page=console.scan_progress,
        )
        console.scanned(found.report)
    selected = candidates(target.repository, job_ids, found)
    job_plan = plan_jobs(selected, planned_at, options)
    steps = job_plan.steps
    console.selected(steps, job_plan.not_found)
    document: dict[str, Any] = {
        "target": target.label,
        "dryRun": arguments.dry_run,
        "scan": _scan_document(query, found.report) if query is not None and found is not None else None,
        "notFound": job_plan.not_found,
    }
    if arguments.dry_run:
        console.plan(steps)
        console.finish({**document, "steps": [_job_step_document(step) for step in steps]})
        # The exit code the run would give, so a script can check the plan before running it.
        if job_plan.not_found or any(step.action not in p.DISPATCHING for step in steps):
            return ExitCode.FAILED
        return ExitCode.OK
    grace = timedelta(seconds=settings.dispatch_grace_seconds)
    redrive = JobsRedrive(
        target.repository, target.payloads, target.queues, now=now, grace=grace, budgets=target.budgets
    )
    outcomes: list[JobOutcome] = []

    def record(outcome: JobOutcome) -> None:
        outcomes.append(outcome)
        console.outcome(outcome)

    try:
        redrive.run(steps, record)
    except KeyboardInterrupt:
        console.interrupted(outcomes, steps, grace)
        console.finish({**document, "interrupted": True, "steps": _run_documents(steps, outcomes)})
        return ExitCode.INTERRUPTED
    console.summary(outcomes)
    console.finish({**document, "interrupted": False, "steps": _run_documents(steps, outcomes)})
    if job_plan.not_found or any(o.result is not Result.DONE for o in outcomes):
        return ExitCode.FAILED
    return ExitCode.OK


def _scan_document(query: FailedJobsQuery, report: ScanReport) -> dict[str, Any]:
    return {
        "errorCodes": sorted(query.error_codes),
        "since": instant(query.since),
        "pages": report.pages,
        "itemsRead": report.items_read,
        "matched": report.matched,
        "readUnits": report.read_units,
    }


def _job_step_document(step: JobStep) -> dict[str, Any]:
    job = step.job
    lane = step.decision.lane
    return {
        "jobId": step.job_id,
        "selectedBy": list(step.candidate.selected_by),
        "tenant": job.tenant if job else None,
        "status": job.status.value if job else None,
        "errorCode": job.error.code if job and job.error else None,
        "updatedAt": instant(job.updated_at) if job else None,
        "attempts": job.attempts if job else None,
        "stalls": job.stalls if job else None,
        "maxAttempts": job.max_attempts if job else None,
        "crashes": job.crashes if job else None,
        "isolated": job.isolated if job else None,
        "redriveCount": job.redrive_count if job else None,
        "unreadable": step.candidate.unreadable,
        "action": step.action.value,
        "why": step.why,
        "sendsTo": queue_choice(lane),
        "warnings": list(step.warnings),
    }


def _run_documents(steps: Sequence[JobStep], outcomes: Sequence[JobOutcome]) -> list[dict[str, Any]]:
    results = {outcome.step.job_id: outcome for outcome in outcomes}
    documents = []
    for step in steps:
        document = _job_step_document(step)
        outcome = results.get(step.job_id)
        document["result"] = outcome.result.value if outcome else "not reached"
        document["detail"] = outcome.detail if outcome else "not touched"
        document["sentTo"] = queue_choice(outcome.lane if outcome else None)
        documents.append(document)
    return documents


class _RedriveConsole(OperatorConsole[JobStep]):
    """`jobs redrive`'s lines: the scan, the plan of its jobs, what each did."""

    SCAN_PROGRESS_EVERY = 10  # pages (1 MB each)

    def scanning(self, query: FailedJobsQuery, at: datetime) -> None:
        self.line(
            f"scanning the jobs table for Failed jobs with error code {', '.join(sorted(query.error_codes))} "
            f"last written since {instant(query.since)} ({relative(query.since, at)}): there is no index "
            "of Failed jobs, so this reads (and is billed for) every item of the table"
        )

    def scan_progress(self, report: ScanReport) -> None:
        if report.pages % self.SCAN_PROGRESS_EVERY == 0:
            self.line(f"  ... {report.pages} pages, {report.items_read} items read, {report.matched} matched")

    def scanned(self, report: ScanReport) -> None:
        units = f", {report.read_units:g} read unit(s)" if report.read_units is not None else ""
        self.line(
            f"scan read {report.items_read} item(s) in {report.pages} page(s){units}; "
            f"{report.matched} Failed job(s) matched"
        )

    def selected(self, steps: Sequence[JobStep], not_found: Sequence[str]) -> None:
        self.line(f"{len(steps)} job(s) selected")
        for job_id in not_found:
            self.line(f"no job {job_id} (never created, or expired: expired jobs are gone)")

    def _describe(self, step: JobStep) -> None:
        job = step.job
        if job is None:
            state = "unreadable"
        else:
            state = job.status.value + (f" {job.error.code}" if job.error else "")
        by = " and ".join(step.candidate.selected_by)
        self.line(f"- job {step.job_id}  [{state}]  (selected by {by})")
        self.line(f"    {step.action.value}: {step.why}")
        for warning in step.warnings:
            self.line(f"    warning: {warning}")

    def outcome(self, outcome: JobOutcome) -> None:
        step = outcome.step
        self.line(f"[{outcome.result.value}] job {step.job_id}  {step.action.value}: {outcome.detail}")
        if outcome.result is not Result.DONE:
            self.line(f"    why: {step.why}")
        for warning in step.warnings:
            self.line(f"    warning: {warning}")

    def interrupted(self, outcomes: Sequence[JobOutcome], steps: Sequence[JobStep], grace: timedelta) -> None:
        left = len(steps) - len(outcomes)
        self.line(f"interrupted after {len(outcomes)} of {len(steps)} step(s); {left} not finished.")
        current = steps[len(outcomes)] if left else None
        if current is not None and current.action in p.DISPATCHING:
            self.line(
                f"job {current.job_id} was in progress: if its write went through, it is Pending without "
                f"a message. Rerun `outlast ops jobs redrive {current.job_id}` (it plans a redispatch); the "
                f"sweeper re-sends it after its grace ({int(grace.total_seconds())} s) anyway."
            )

    def summary(self, outcomes: Sequence[JobOutcome]) -> None:
        counts = Counter(o.result.value for o in outcomes)
        self.line("summary: " + ", ".join(f"{counts.get(r.value, 0)} {r.value}" for r in Result))


def _tier(job: JobRecord) -> str:
    """The tier, and for a batch job what it waits on (`outlast ops batches list` lists the batch)."""
    if job.tier is not Tier.BATCH:
        return job.tier.value
    waiting = (
        f"waiting on provider batch {job.batch_id or '(not yet created)'}"
        if job.waiting_for
        else "not waiting"
    )
    fallback = (
        "; a batch of it expired or failed: its calls run at flex, then standard"
        if job.batch_fallback
        else ""
    )
    late = (
        f"; {job.late_tokens:,} tokens of answers discarded after it ended (in its usage and budget)"
        if job.late_tokens
        else ""
    )
    return f"batch, {waiting}{fallback}{late}"
