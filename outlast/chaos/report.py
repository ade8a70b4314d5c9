"""The end of a chaos run: what must be zero, what each fault cost, as a plain aligned table."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class KindRow:
    """One fault kind: its jobs, how they ended and the model calls they took."""

    kind: str
    jobs: int
    injected: int | None  # jobs where the fault verifiably happened (None: nothing to inject)
    succeeded: int
    failed: int
    canceled: int
    unfinished: int
    calls: int
    extra_per_job: float  # calls per job beyond the no-fault baseline
    expected_extra: float | None  # what a correct system spends (None: depends on the race)
    proves: str

    @property
    def calls_per_job(self) -> float:
        """Model calls per job of this kind."""
        return self.calls / self.jobs if self.jobs else 0.0


@dataclass
class ChaosReport:
    """Everything a run found; `ok` is False on any loss, duplicate, leak, violation, denied call,
    a job that failed for another job's fault, or a provider batch left unseen."""

    run_id: str
    seed: int
    planned: int
    owners: int
    accepted: int = 0
    terminal: int = 0
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)  # outcomes a crash can explain; not failures
    # Jobs that ended Failed though nothing injected into them fails a job: another job's crash,
    # say (DESIGN.md, "Lifecycle": crash isolation). Must be empty.
    blameless_failures: list[str] = field(default_factory=list)
    # Calls local mode denied because a function's role does not allow them (DESIGN.md, "Deploy
    # fidelity"): each would fail in AWS too. Must be empty.
    iam_denials: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)  # submits the clients gave up retrying
    unexplained_calls: list[str] = field(default_factory=list)  # calls a fault does not explain
    job_messages_on_dlq: list[str] = field(default_factory=list)  # messages of real jobs on the DLQ
    relay_batches_given_up: int = 0  # records on the relay's on-failure destination
    succeeded: int = 0
    calls: int = 0
    baseline: float = 0.0
    rows: list[KindRow] = field(default_factory=list)
    collateral_jobs: int = 0
    collateral_extra: float = 0.0  # per job in a crashed batch: the model calls crash isolation cost
    probes: int = 0
    poison_sent: int = 0
    poison_parked: dict[str, int] = field(default_factory=dict)
    faults_fired: dict[str, int] = field(default_factory=dict)
    client_retries: int = 0
    # Token budgets against the model server's own tally of the tokens it served, after the drain
    # and the settlements: per job, what the ledger charged (its closed reservations) is at most what
    # was served, and equal for a job no fault touched; nothing stays reserved. Each mismatch is a
    # line; must be empty. None: the stack has no budget (nothing reserved or settled).
    budget_mismatches: list[str] | None = None
    budget_jobs: int = 0
    budget_charged: int = 0  # what the ledger charged the run's jobs, in tokens
    budget_served: int = 0  # what the model server served them
    budget_exact_jobs: int = 0  # jobs no fault touched, held to equality
    budget_reserved: int = 0
    # Streaming output (DESIGN.md, "Streaming output"): Succeeded streaming jobs whose result
    # attempt's events were checked (gapless, joining to the result), and the output messages the
    # owners' followers received (none may belong to another owner: leaks say so).
    streamed: int = 0
    output_messages: int = 0
    # The batch tier (DESIGN.md, "Cost tiers"): the batches the model server created, those of them
    # cancelled, and what was left running or open after the drain (a batch nothing will ever see
    # through, cancel or count: outlast.chaos.provider_batches). Must be empty.
    provider_batches: int = 0
    provider_batches_cancelled: int = 0
    batch_leftovers: list[str] = field(default_factory=list)
    run_seconds: float | None = None
    drain_seconds: float | None = None
    jobs: list[dict[str, Any]] = field(default_factory=list)  # per job, for --json-out only

    @property
    def isolation_extra_calls(self) -> float:
        """The model calls crash isolation cost: the extra calls of every job in a crashed batch."""
        return self.collateral_extra * self.collateral_jobs

    @property
    def calls_per_succeeded(self) -> float:
        """Every model call of the run per Succeeded job."""
        return self.calls / self.succeeded if self.succeeded else 0.0

    @property
    def ok(self) -> bool:
        """True when nothing was lost, duplicated or leaked, and no invariant broke."""
        drifted = bool(self.budget_mismatches)
        return not (
            self.lost
            or self.duplicates
            or self.leaks
            or self.violations
            or self.blameless_failures
            or self.iam_denials
            or self.batch_leftovers
            or drifted
        )

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (`--json-out`)."""
        data = asdict(self)
        data["calls_per_succeeded"] = round(self.calls_per_succeeded, 3)
        data["isolation_extra_calls"] = round(self.isolation_extra_calls, 3)
        data["ok"] = self.ok
        for row, raw in zip(self.rows, data["rows"], strict=True):
            raw["calls_per_job"] = round(row.calls_per_job, 3)
        return data


def _number(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _seconds(value: float | None) -> str:
    return "did not drain" if value is None else f"{value:.1f} s"


def _must_be_zero(items: list[str]) -> str:
    return f"{len(items)}  (must be 0)" + ("" if not items else "  <-- FAIL")


def _budget(report: ChaosReport) -> str:
    if report.budget_mismatches is None:
        return "not measured (the stack has no token budget)"
    verdict = "" if not report.budget_mismatches else "  <-- FAIL"
    return (
        f"{len(report.budget_mismatches)}  (must be 0)  [{report.budget_jobs} jobs: charged "
        f"{report.budget_charged}, served {report.budget_served}; equal on the "
        f"{report.budget_exact_jobs} no fault touched; reserved {report.budget_reserved}]{verdict}"
    )


def kinds_table(report: ChaosReport) -> list[str]:
    """One aligned line per fault kind."""
    header = (
        "fault kind",
        "jobs",
        "injected",
        "Succeeded",
        "Failed",
        "Canceled",
        "open",
        "calls",
        "calls/job",
        "extra/job",
        "expected",
    )
    lines = [
        (
            row.kind,
            str(row.jobs),
            "-" if row.injected is None else str(row.injected),
            str(row.succeeded),
            str(row.failed),
            str(row.canceled),
            str(row.unfinished),
            str(row.calls),
            _number(row.calls_per_job),
            _number(row.extra_per_job, signed=True),
            _number(row.expected_extra, signed=True),
        )
        for row in report.rows
    ]
    widths = [max(len(cells[i]) for cells in [header, *lines]) for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest])

    return [fmt(header), "  ".join("-" * width for width in widths), *(fmt(cells) for cells in lines)]


def summary_lines(report: ChaosReport) -> list[tuple[str, str]]:
    """The totals, the must-be-zero counts first."""
    parked = sum(report.poison_parked.values())
    reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(report.poison_parked.items()))
    fired = sum(report.faults_fired.values())
    return [
        ("accepted", f"{report.accepted} of {report.planned}"),
        ("reached a terminal state", str(report.terminal)),
        ("lost", _must_be_zero(report.lost)),
        ("duplicate jobs", _must_be_zero(report.duplicates)),
        ("cross-owner reads that leaked", _must_be_zero(report.leaks) + f"  [{report.probes} probes]"),
        (
            "streamed results checked against their events",
            f"{report.streamed}  ({report.output_messages} output messages to followers)",
        ),
        ("invariant violations", _must_be_zero(report.violations)),
        ("jobs failed without a fault of their own", _must_be_zero(report.blameless_failures)),
        ("calls a function's role denied (IAM)", _must_be_zero(report.iam_denials)),
        ("budget ledger vs tokens served", _budget(report)),
        (
            "provider batches left running or open",
            _must_be_zero(report.batch_leftovers)
            + f"  [{report.provider_batches} created, {report.provider_batches_cancelled} cancelled]",
        ),
        ("model calls per Succeeded job", f"{report.calls_per_succeeded:.2f}  ({report.calls} calls)"),
        ("no-fault baseline calls per job", f"{report.baseline:.2f}"),
        ("jobs with model calls no fault explains", f"{len(report.unexplained_calls)}  (should be 0)"),
        (
            "jobs in a batch a worker died with",
            f"{report.collateral_jobs}  (isolated, then run alone: extra calls/job "
            f"{report.collateral_extra:+.2f}, {report.isolation_extra_calls:+.0f} in all)",
        ),
        ("process faults fired (shim)", str(fired)),
        ("poison messages parked", f"{parked} of {report.poison_sent}  ({reasons or 'none'})"),
        ("job messages on the DLQ (redrive)", str(len(report.job_messages_on_dlq))),
        ("relay batches given up (failure queue)", str(report.relay_batches_given_up)),
        ("client retries (5xx, 429, resets)", str(report.client_retries)),
        ("submits the clients gave up on", str(len(report.abandoned))),
        ("unexpected outcomes (not failures)", str(len(report.unexpected))),
        ("time to drain (last accept -> all terminal)", _seconds(report.drain_seconds)),
        ("run time (first submit -> all terminal)", _seconds(report.run_seconds)),
    ]


def render(report: ChaosReport) -> str:
    """The whole report as plain text."""
    title = (
        f"outlast chaos run {report.run_id}: {report.planned} jobs, seed {report.seed}, "
        f"{report.owners} owners"
    )
    summary = summary_lines(report)
    width = max(len(label) for label, _ in summary)
    lines = [title, "", *kinds_table(report), ""]
    lines += [f"{label.ljust(width)}  {value}" for label, value in summary]
    for heading, items in (
        ("lost", report.lost),
        ("duplicates", report.duplicates),
        ("leaks", report.leaks),
        ("violations", report.violations),
        ("jobs failed without a fault of their own", report.blameless_failures),
        ("calls a function's role does not allow", report.iam_denials),
        ("budget ledger vs tokens served", report.budget_mismatches or []),
        ("provider batches left running or open", report.batch_leftovers),
        ("unexpected outcomes", report.unexpected),
        ("model calls no fault explains", report.unexplained_calls),
        ("submits the clients gave up on", report.abandoned),
    ):
        if items:
            lines += ["", f"{heading}:"] + [f"  {item}" for item in items[:50]]
            if len(items) > 50:
                lines.append(f"  ... and {len(items) - 50} more (see --json-out)")
    lines += ["", "PASS" if report.ok else "FAIL"]
    return "\n".join(lines)
