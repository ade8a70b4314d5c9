"""`outlast ops jobs redrive`: re-run jobs whose message is gone, named by id or found by a scan.

A job that failed normally (provider_auth during an outage, retries_exhausted, worker_crashed)
has no message anywhere: the worker or the sweeper finished it. `dlq redrive` cannot reach it;
this can. The decision per job is the DLQ redrive's own (outlast.operator.plan.decide_job), and
each dispatching step is the same write -> input retention -> send (outlast.operator.dispatch),
with no message to delete afterwards.

There is no index of Failed jobs (the sweeper's sparse index holds only live jobs, and an index
for an operator tool would cost every terminal write an index write), so `--error-code C --since
T` is a paginated Scan of the jobs table: it reads every item of the table (jobs, their inputs
and results), whatever the filter, and is billed for all of it. An operator tool only; the run
prints how many items it read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from outlast.operator.budgets import OperatorBudgets
from outlast.operator.dispatch import Result, dispatch
from outlast.operator.dlq import read_job
from outlast.operator.plan import DISPATCHING, Action, Decision, PlanOptions, decide_job, warnings_for
from shared import resources as r
from shared.adapters.dynamo_errors import storage_errors
from shared.adapters.dynamo_items import job_from_item, serialize
from shared.clock import to_iso
from shared.job import JobRecord
from shared.lifecycle import JobStatus
from shared.ports import JobQueue, JobRepository, Lane, PayloadStore


@dataclass(frozen=True)
class FailedJobsQuery:
    """`--error-code C... --since T`: Failed jobs with one of these codes, last written at or after T."""

    error_codes: frozenset[str]
    since: datetime


@dataclass(frozen=True)
class ScanReport:
    """What the scan cost: every item it read is billed, matched or not."""

    pages: int
    items_read: int  # ScannedCount over all pages
    matched: int
    read_units: float | None  # ConsumedCapacity over all pages, where the service reports it


@dataclass(frozen=True)
class Found:
    """The Failed jobs a scan matched, the matching items it could not read, and its cost."""

    jobs: list[JobRecord]
    unreadable: dict[str, str]  # job id -> why its item could not be read
    report: ScanReport


def scan_failed_jobs(
    dynamodb: Any,
    table: str,
    query: FailedJobsQuery,
    now: datetime,
    *,
    page_size: int | None,
    on_page: Callable[[ScanReport], None] | None = None,
) -> Found:
    """Every job item matching the query, page by page (eventually consistent: half the read
    units; each write re-checks the job anyway). A page is 1 MB of items, or `page_size` items
    when given: smaller pages spread the scan's reads over more requests, so a provisioned table
    sees smaller bursts. `on_page` hears the running totals."""
    codes = sorted(query.error_codes)
    code_values = {f":code{index}": code for index, code in enumerate(codes)}
    arguments: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": (
            # Expired jobs are gone, even before TTL deletes them.
            "#type = :job AND #status = :failed AND #updatedAt >= :since AND #expiresAt > :now "
            f"AND #errorCode IN ({', '.join(code_values)})"
        ),
        "ExpressionAttributeNames": {
            "#type": r.TYPE_ATTRIBUTE,
            "#status": "status",
            "#updatedAt": "updatedAt",
            "#expiresAt": "expiresAt",
            "#errorCode": "errorCode",
        },
        "ExpressionAttributeValues": serialize(
            {
                ":job": r.JOB_ITEM_TYPE,
                ":failed": JobStatus.FAILED.value,
                ":since": to_iso(query.since),
                ":now": to_iso(now),
                **code_values,
            }
        ),
        "ReturnConsumedCapacity": "TOTAL",
    }
    if page_size is not None:
        arguments["Limit"] = page_size
    jobs: list[JobRecord] = []
    unreadable: dict[str, str] = {}
    pages = items_read = 0
    read_units: float | None = None
    while True:
        with storage_errors():
            response = dynamodb.scan(**arguments)
        pages += 1
        items_read += int(response.get("ScannedCount", 0))
        consumed = response.get("ConsumedCapacity", {}).get("CapacityUnits")
        if consumed is not None:
            read_units = (read_units or 0.0) + float(consumed)
        for item in response.get("Items", []):
            job_id = str(item.get(r.PARTITION_KEY, {}).get("S", "")).removeprefix("JOB#")
            try:
                jobs.append(job_from_item(item))
            except (KeyError, ValueError, TypeError) as error:
                unreadable[job_id] = f"{type(error).__name__} while reading it"
        report = ScanReport(pages, items_read, len(jobs) + len(unreadable), read_units)
        if on_page is not None:
            on_page(report)
        last = response.get("LastEvaluatedKey")
        if not last:
            break
        arguments["ExclusiveStartKey"] = last
    jobs.sort(key=lambda job: (job.updated_at, job.job_id))
    return Found(jobs, unreadable, report)


@dataclass(frozen=True)
class Candidate:
    """A job the run selected, as read (None: none exists, or its record could not be read)."""

    job_id: str
    job: JobRecord | None
    unreadable: str | None = None
    selected_by: tuple[str, ...] = ()


def candidates(repository: JobRepository, job_ids: Iterable[str], found: Found | None) -> list[Candidate]:
    """The jobs named by id (read strongly consistent, in the order given), then those the scan
    found; a job selected both ways appears once."""
    by_id: dict[str, Candidate] = {}
    for job_id in job_ids:
        if job_id not in by_id:
            job, unreadable = read_job(repository, job_id)
            by_id[job_id] = Candidate(job_id, job, unreadable, ("id",))
    if found is not None:
        scanned = [Candidate(job.job_id, job, None, ("scan",)) for job in found.jobs]
        scanned += [Candidate(i, None, why, ("scan",)) for i, why in sorted(found.unreadable.items())]
        for candidate in scanned:
            known = by_id.get(candidate.job_id)
            if known is None:
                by_id[candidate.job_id] = candidate
            else:
                by_id[candidate.job_id] = Candidate(
                    known.job_id, known.job, known.unreadable, (*known.selected_by, "scan")
                )
    return list(by_id.values())


@dataclass(frozen=True)
class JobStep:
    """One job's place in the plan: the decision, how it was selected, and warnings."""

    candidate: Candidate
    decision: Decision
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def job_id(self) -> str:
        """The job."""
        return self.candidate.job_id

    @property
    def job(self) -> JobRecord | None:
        """The job as read when the plan was made (the guard of every write)."""
        return self.candidate.job

    @property
    def action(self) -> Action:
        """What the run does with the job."""
        return self.decision.action

    @property
    def why(self) -> str:
        """Why, in words."""
        return self.decision.why


@dataclass(frozen=True)
class JobPlan:
    """The steps, and the ids that named no job (never created, or expired: expired jobs are gone)."""

    steps: list[JobStep]
    not_found: list[str]


def plan_jobs(selected: Sequence[Candidate], now: datetime, options: PlanOptions) -> JobPlan:
    """Decide every selected job (a pure function of the jobs as read, the instant and the options)."""
    steps: list[JobStep] = []
    not_found: list[str] = []
    for candidate in selected:
        job = candidate.job
        if candidate.unreadable is not None:
            why = f"the job record could not be read ({candidate.unreadable}); repair it, then rerun"
            steps.append(JobStep(candidate, Decision(Action.SKIP, why)))
        elif job is None or job.is_expired(now):
            not_found.append(candidate.job_id)
        else:
            decision = decide_job(job, now, options)
            steps.append(JobStep(candidate, decision, warnings_for(job, decision.action, now)))
    return JobPlan(steps, not_found)


@dataclass(frozen=True)
class JobOutcome:
    """One executed step."""

    step: JobStep
    result: Result
    detail: str
    lane: Lane | None = None  # where the job was sent (done only)


class JobsRedrive:
    """Carries out a jobs plan, step by step, exactly as planned (never re-planning on its own)."""

    def __init__(
        self,
        repository: JobRepository,
        payloads: PayloadStore,
        queues: Mapping[Lane, JobQueue],
        *,
        now: Callable[[], datetime],
        grace: timedelta,
        budgets: OperatorBudgets | None,
    ) -> None:
        self._repository = repository
        self._payloads = payloads
        self._queues = queues
        self._now = now
        self._grace = grace
        self._budgets = budgets  # a redrive reserves the new run's tokens (None: a stack without budgets)

    def run(self, steps: Sequence[JobStep], report: Callable[[JobOutcome], None]) -> list[JobOutcome]:
        """Every step in plan order; `report` hears each outcome as it happens."""
        outcomes = []
        for step in steps:
            outcome = self._step(step)
            outcomes.append(outcome)
            report(outcome)
        return outcomes

    def _step(self, step: JobStep) -> JobOutcome:
        if step.action not in DISPATCHING or step.job is None:
            return JobOutcome(step, Result.KEPT, "left as it was")
        sent = dispatch(
            self._repository,
            self._payloads,
            self._queues,
            step.job,
            step.decision,
            now=self._now(),
            grace=self._grace,
            trace_id=None,
            rerun=f"rerun `outlast ops jobs redrive {step.job_id}`",
            budgets=self._budgets,
        )
        return JobOutcome(step, sent.result, sent.detail, sent.lane)
