"""`outlast jobs inspect JOB_ID`: the operator's view of one job (AWS credentials, never the API).

The public API shows a caller their own status document; this shows an operator the internal
record: lease, attempts, dispatchAt, redriveCount, the sweeper's next look, where the input and
result live (and their sizes, never their text), and where the job's messages are.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from outlast.commands.dlq import EXIT_ERROR, EXIT_OK, UsageError, guarded, now
from outlast.operator.inspect import (
    Inspection,
    Payload,
    UnreadableJobError,
    inspect_job,
    inspection_document,
    lease_prefix,
)
from outlast.operator.targets import add_target_arguments, resolve
from outlast.operator.text import duration, instant, relative
from shared.ids import normalize_job_id

EXIT_NOT_FOUND = 1

INSPECT_EPILOG = f"""\
exit codes:
  {EXIT_OK}    the job was found and shown
  {EXIT_NOT_FOUND}    no such job (never created, or expired and deleted)
  {EXIT_ERROR}    usage error, no such target, an AWS error, or a job record this version cannot read
  130  interrupted

Finding the job's DLQ messages means receiving (and at once releasing) every DLQ message, which
raises each one's ApproximateReceiveCount by one; --no-dlq skips that. Messages on the jobs
queue cannot be searched without taking them from the worker: only the queue's depth is shown.
"""


def register(commands: Any) -> None:
    """Add `jobs inspect`."""
    group = commands.add_parser(
        "jobs", help="operator views of jobs (AWS credentials, not the API)"
    ).add_subparsers(dest="jobs_command", required=True, metavar="COMMAND")
    inspect = group.add_parser(
        "inspect",
        help="the full internal record of one job",
        description="Show one job as stored: lease, attempts, dispatch, storage and messages.",
        epilog=INSPECT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inspect.add_argument("job_id", metavar="JOB_ID")
    add_target_arguments(inspect)
    inspect.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    inspect.add_argument("--no-dlq", action="store_true", help="do not read the DLQ for this job's messages")
    inspect.set_defaults(run=guarded(_inspect))


def _inspect(arguments: argparse.Namespace) -> int:
    job_id = normalize_job_id(arguments.job_id)
    if job_id is None:
        raise UsageError(f"{arguments.job_id!r} is not a job id (a UUID)")
    target = resolve(arguments)
    try:
        inspection = inspect_job(target, job_id, now(), read_dlq=not arguments.no_dlq)
    except UnreadableJobError as error:
        print(f"outlast: {error}: repair it (docs/runbook.md#dlq-not-empty)", file=sys.stderr)
        return EXIT_ERROR
    if inspection is None:
        print(f"no job {job_id} on the {target.label}")
        return EXIT_NOT_FOUND
    if arguments.json:
        print(json.dumps({"target": target.label, **inspection_document(inspection)}, indent=2))
        return EXIT_OK
    for line in _lines(inspection, target.label):
        print(line)
    return EXIT_OK


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
        ("dispatchAt", f"{instant(job.dispatch_at)} ({_due(inspection)})"),
        ("lease", _lease(inspection)),
        ("cancel", instant(job.cancel_requested_at) if job.cancel_requested_at else "not requested"),
        (
            "usage",
            f"{job.usage.input_tokens} in / {job.usage.output_tokens} out tokens" if job.usage else "-",
        ),
        ("sweeper", _sweep(inspection)),
        ("input", _payload(inspection.input)),
        ("result", _payload(inspection.result) if inspection.result else "none"),
        ("DLQ", _dlq(inspection)),
    ]
    lines = [f"job {job.job_id} on the {label}, as of {instant(at)}"]
    lines += [f"  {name:<11} {value}" for name, value in rows]
    lines += [f"  {'':<11} message {m}" for m in _dlq_messages(inspection)]
    if inspection.dlq_messages is not None:
        lines.append(
            f"  {'':<11} (reading the DLQ raised every DLQ message's ApproximateReceiveCount by one)"
        )
    lines.append(
        f"  {'jobs queue':<11} {_depth(inspection.jobs_queue_depth)}; its messages may be among them "
        "(SQS cannot be searched without receiving, which would take them from the worker)"
    )
    return lines


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


def _dlq(inspection: Inspection) -> str:
    depth = _depth(inspection.dlq_depth)
    if inspection.dlq_messages is None:
        return f"{depth}; not searched (--no-dlq)"
    found = f"{depth}; {len(inspection.dlq_messages)} of them for this job"
    if inspection.dlq_incomplete:
        found += " among those read (reading stopped early: there may be more)"
    return found


def _dlq_messages(inspection: Inspection) -> list[str]:
    return [
        f"{m.message_id}: {m.source}, received {m.receive_count} times, "
        f"sent {duration(inspection.now - m.sent_at)} ago"
        for m in inspection.dlq_messages or []
    ]


def _depth(depth: Any) -> str:
    return f"{depth.visible} visible, {depth.in_flight} in flight, {depth.delayed} delayed"
