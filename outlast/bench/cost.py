"""Cost per job: every AWS request, unit and byte of one job's life, priced with docs/prices.json.

A job's life here is what DESIGN.md's floor counts: submit, three status polls, the relay, the
worker (claim, model call, result, terminal state, input expiry). Jobs run in batches of the
worker's batch size (10) through the real handlers (`outlast.bench.harness`), so per-job
figures carry a tenth of a relay and a worker invocation, as under steady load; a batch of one
shows the quiet-traffic case.

Three kinds of pass, on warm containers:
- accounting (item images on): API calls, bytes, DynamoDB units computed from the item images,
  log bytes and EMF metrics;
- timing (images off, repeated, interleaved): each handler's duration, the in-process stand-in
  for Lambda's billed duration; the worker's is measured without the time its model calls were
  in flight (the model wait is priced separately, per second);
- the sweeper once per pass: a fixed monthly cost, not a per-job one.

Two more figures come from the same counts: the provisioned-capacity stage option
(`billingMode=provisioned`), where a job's write and read units divided by the target
utilisation (70%) are the capacity-unit-hours it keeps provisioned; and Lambda's INIT, billed since
August 2025, priced from the cold-start section's measured extra time per cold start at a stated
share of cold starts (`apply_cold_starts`).
"""

from __future__ import annotations

import json
import math
import re
import statistics
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from infra.config import StageConfig
from outlast.bench import push
from outlast.bench.harness import SHARED_SERVICE_NAME, FunctionSpec, Harness, Invocation, model_wait_seconds
from outlast.bench.meter import ApiCall
from outlast.bench.prices import PriceTable
from outlast.bench.stats import summary
from outlast.local.event_sources import scheduled_event

API_POLLS = 3  # after the submit, after the relay, after the worker
# Lambda with active tracing samples the first request each second and 5% of the rest (X-Ray's
# default rule); at steady load the 5% dominates. HTTP APIs do not trace, so each invocation of a
# traced function (the template's TracingConfig) is a trace of its own.
XRAY_SAMPLING_RATE = 0.05
HOURS_PER_MONTH = 730
GIB = 2**30
# What the Lambda platform writes per invocation (text log format, active tracing): START, END
# and REPORT lines with the X-Ray trace line. Shape copied from CloudWatch; the byte count is
# what matters.
_REQUEST_ID = "8f5a3c2e-5b1d-4c7e-9f0a-1b2c3d4e5f60"
PLATFORM_LOG_LINES = (
    f"START RequestId: {_REQUEST_ID} Version: $LATEST\n",
    f"END RequestId: {_REQUEST_ID}\n",
    f"REPORT RequestId: {_REQUEST_ID}\tDuration: 23.45 ms\tBilled Duration: 24 ms\tMemory Size: 512 MB\t"
    "Max Memory Used: 98 MB\t\nXRAY TraceId: 1-6749a1b2-0123456789abcdef01234567\t"
    "SegmentId: 0123456789abcdef\tSampled: true\t\n",
)
PLATFORM_LOG_BYTES = sum(len(line.encode()) for line in PLATFORM_LOG_LINES)
# START, END and REPORT are INFO lines: a function whose system log level is WARN writes none.
_PLATFORM_LINE_LEVELS = frozenset({None, "DEBUG", "INFO"})
# Lambda's SQS poller long-polls an idle queue; AWS documents five pollers to start with and a
# 20-second long poll: 5 x 3 receives a minute whether or not jobs arrive (an estimate).
IDLE_SQS_RECEIVES_PER_MINUTE = 5 * 3
STEP_FUNCTIONS_TRANSITIONS = 5
SECONDS_PER_HOUR = 3600
# The provisioned stage option's defaults (infra/config.py): what `billingMode=provisioned` deploys.
_STAGE = StageConfig()
PROVISIONED_UTILISATION = _STAGE.capacity_target_utilization / 100
# Target tracking keeps a high and a low CloudWatch alarm per scaled dimension (an estimate of how
# many Application Auto Scaling creates; they are billed as standard alarms).
AUTO_SCALING_ALARMS_PER_TARGET = 2
# AWS: "INITs (cold starts) typically occur in under 1% of invocations" (AWS Compute Blog, "AWS
# Lambda standardizes billing for INIT Phase", 2025); the bench's default share, a parameter.
DEFAULT_INVOCATIONS_PER_COLD_START = 100
TEXT = "Outlast benchmark job {index}. It summarizes a short document. Two sentences are enough."
_CDK_HASH = re.compile(r"[0-9A-F]{8}$")  # the hash CDK appends to logical ids
_RATE = re.compile(r"rate\((\d+)\s+(minute|minutes|hour|hours)\)")


@dataclass
class Lifecycle:
    """One batch of jobs taken from submit to Succeeded."""

    pass_name: str
    size: int
    job_ids: list[str]
    model_calls: list[dict[str, Any]]
    documents: list[dict[str, Any]]  # the jobs' status documents at the end


def run_lifecycle(h: Harness, pass_name: str, size: int, text: str = TEXT) -> Lifecycle:
    """Submit `size` jobs, poll, relay, work one batch, poll: the life DESIGN.md's floor prices."""
    h.pass_name = pass_name
    sub = f"bench-{pass_name}-{uuid.uuid4().hex[:8]}"  # one owner per batch: the submit rate is per owner
    try:
        jobs = [h.submit(text.replace("{index}", str(i)), sub) for i in range(size)]
        for job in jobs:  # poll 1: Pending
            h.status(job, sub)
        h.relay()
        for job in jobs:  # poll 2: Pending, dispatched
            h.status(job, sub)
        h.reset_model_calls()
        worked, attempts = 0, 0
        while worked < size and attempts < 20:
            worked, attempts = worked + h.work(), attempts + 1
        calls = h.model_calls()
        documents = [h.status(job, sub) for job in jobs]  # poll 3: Succeeded
    finally:
        h.pass_name = None
    unfinished = [d["status"] for d in documents if d["status"] != "Succeeded"]
    if unfinished:
        raise RuntimeError(f"{pass_name}: jobs did not succeed: {unfinished}")
    return Lifecycle(pass_name=pass_name, size=size, job_ids=jobs, model_calls=calls, documents=documents)


def run_sweep(h: Harness, pass_name: str) -> None:
    """One scheduled sweeper run, metered under the pass."""
    h.pass_name = pass_name
    try:
        h.invoke("sweeper", scheduled_event())
    finally:
        h.pass_name = None


# --- quantities ----------------------------------------------------------------------------


@dataclass
class Quantities:
    """What one job uses, per job, at one batch fill."""

    batch: int
    invocations: dict[str, float] = field(default_factory=dict)
    billed_ms: dict[str, float] = field(default_factory=dict)  # per invocation, rounded up to 1 ms
    memory_mb: dict[str, int] = field(default_factory=dict)
    api_requests: float = 0.0
    write_units_table: float = 0.0
    write_units_index: float = 0.0
    read_units: float = 0.0
    sqs_requests: float = 0.0
    stream_calls: float = 0.0
    secrets_calls: float = 0.0
    s3_puts: float = 0.0
    s3_gets: float = 0.0
    stdout_bytes: dict[str, float] = field(default_factory=dict)  # per job, by function
    platform_bytes: dict[str, int] = field(default_factory=dict)  # Lambda's lines per invocation
    traced: frozenset[str] = frozenset()  # the functions with active tracing
    response_bytes: float = 0.0
    transitions: float = 0.0

    @property
    def gb_seconds(self) -> dict[str, float]:
        """Billed GB-seconds per job, by function."""
        return {
            name: count * self.billed_ms.get(name, 0.0) / 1000 * self.memory_mb.get(name, 0) / 1024
            for name, count in self.invocations.items()
        }

    @property
    def log_bytes(self) -> float:
        """Bytes ingested by CloudWatch Logs per job: the functions' output and Lambda's own lines."""
        return sum(self.stdout_bytes.values()) + self.platform_bytes_per_job

    @property
    def platform_bytes_per_job(self) -> float:
        """Bytes of Lambda's own START/END/REPORT lines per job, at each function's system log level."""
        return sum(count * self.platform_bytes.get(name, 0) for name, count in self.invocations.items())

    @property
    def traces(self) -> float:
        """X-Ray traces recorded per job at the sampling rate: invocations of traced functions."""
        return (
            sum(count for name, count in self.invocations.items() if name in self.traced) * XRAY_SAMPLING_RATE
        )


def platform_log_bytes(spec: FunctionSpec) -> int:
    """Bytes Lambda writes of its own per invocation of the function, at its system log level."""
    return PLATFORM_LOG_BYTES if spec.system_log_level in _PLATFORM_LINE_LEVELS else 0


def _function_of(phase: str) -> str:
    parts = phase.split("/")
    return parts[1] if len(parts) > 2 else parts[-1]


def _log_bytes(h: Harness, prefix: str, function_name: str | None = None) -> tuple[float, int]:
    """Function stdout bytes (with each line's service name as deployed) and line count."""
    total_bytes, total_lines = 0.0, 0
    for phase, size in h.logs.bytes.items():
        if not phase.startswith(prefix) or phase.endswith(("poller-relay", "poller-worker")):
            continue
        name = _function_of(phase)
        if function_name is not None and name != function_name:
            continue
        lines = h.logs.lines.get(phase, 0)
        total_bytes += size + lines * (len(name) - len(SHARED_SERVICE_NAME))
        total_lines += lines
    return total_bytes, total_lines


def _sqs_billed(calls: Iterable[ApiCall]) -> float:
    """Billed SQS requests: the functions' own, and the event source mapping's receives that
    returned messages and its deletes. Empty receives are the poller idling (priced as fixed)."""
    total = 0.0
    for call in calls:
        if call.service != "sqs":
            continue
        if call.source == "poller" and call.operation == "ReceiveMessage" and not call.returned:
            continue
        total += call.billed_requests
    return total


def account(h: Harness, run: Lifecycle) -> tuple[Quantities, dict[str, Any]]:
    """Per-job quantities of an accounting pass, and the details behind them."""
    prefix = f"{run.pass_name}/"
    calls = h.meter.calls_in(prefix)
    invocations = [i for i in h.invocations if i.phase.startswith(prefix)]
    per_job = 1 / run.size
    counts = Counter(i.function for i in invocations)
    q = Quantities(batch=run.size)
    q.invocations = {name: count * per_job for name, count in counts.items()}
    q.memory_mb = {name: spec.memory_mb for name, spec in h.functions.items()}
    q.platform_bytes = {name: platform_log_bytes(spec) for name, spec in h.functions.items()}
    q.traced = frozenset(name for name, spec in h.functions.items() if spec.traced)
    q.api_requests = (counts["submit"] + counts["status"]) * per_job
    dynamo = [c for c in calls if c.service == "dynamodb"]
    q.write_units_table = sum(c.write_units or 0 for c in dynamo) * per_job
    q.write_units_index = sum(sum(c.index_write_units.values()) for c in dynamo) * per_job
    q.read_units = sum(c.read_units or 0 for c in dynamo) * per_job
    q.sqs_requests = _sqs_billed(calls) * per_job
    q.stream_calls = sum(1 for c in calls if c.service == "dynamodbstreams") * per_job
    q.secrets_calls = sum(1 for c in calls if c.service == "secretsmanager") * per_job
    q.s3_puts = sum(1 for c in calls if c.service == "s3" and c.operation == "PutObject") * per_job
    q.s3_gets = sum(1 for c in calls if c.service == "s3" and c.operation == "GetObject") * per_job
    stdout_bytes, stdout_lines = _log_bytes(h, prefix)
    q.stdout_bytes = {name: _log_bytes(h, prefix, name)[0] * per_job for name in counts}
    q.response_bytes = sum(i.response_bytes for i in invocations) * per_job
    details = {
        "calls": _call_table(calls, per_job, h),
        "dynamodb": _dynamo_table(dynamo, per_job, h),
        "reportedByMoto": _reported(dynamo),
        "logs": {
            "functionStdoutBytesPerJob": round(stdout_bytes * per_job, 1),
            "functionStdoutLinesPerJob": round(stdout_lines * per_job, 2),
            "platformBytesPerInvocation": PLATFORM_LOG_BYTES,
            "platformBytesPerJob": round(q.platform_bytes_per_job, 1),
            "systemLogLevels": {name: spec.system_log_level for name, spec in sorted(h.functions.items())},
            "traced": sorted(q.traced),
            "byFunction": {name: round(size, 1) for name, size in sorted(q.stdout_bytes.items())},
        },
        "bytes": _bytes_table(calls, per_job),
    }
    return q, details


def _table_label(h: Harness, table: str | None) -> str:
    for logical_id, name in h.resources.tables.items():
        if name == table:
            return _CDK_HASH.sub("", logical_id.removeprefix("Storage")) or logical_id
    return table or "-"


def _call_table(calls: list[ApiCall], per_job: float, h: Harness) -> list[dict[str, Any]]:
    grouped: dict[tuple[str, str, str, str], list[ApiCall]] = defaultdict(list)
    for call in calls:
        key = (call.source, call.service, call.operation, _table_label(h, call.table) if call.table else "")
        grouped[key].append(call)
    rows = []
    for (source, service, operation, table), group in sorted(grouped.items()):
        row: dict[str, Any] = {
            "source": source,
            "service": service,
            "operation": operation,
            "perJob": round(len(group) * per_job, 3),
        }
        if table:
            row["table"] = table
        if service == "sqs" and operation == "ReceiveMessage":
            row["withMessagesPerJob"] = round(sum(1 for c in group if c.returned) * per_job, 3)
        errors = Counter(c.error for c in group if c.error)
        if errors:
            row["errors"] = dict(errors)
        rows.append(row)
    return rows


def _dynamo_table(calls: list[ApiCall], per_job: float, h: Harness) -> list[dict[str, Any]]:
    rows = []
    for index, call in enumerate(calls):
        row: dict[str, Any] = {
            "step": f"{_function_of(call.phase)}",
            "operation": call.operation,
            "table": _table_label(h, call.table),
            "item": call.item_kind or "-",
            "itemBytes": call.item_bytes,
        }
        if call.index:
            row["index"] = call.index
        if call.read_units is not None:
            row["readUnits"] = call.read_units
        if call.write_units is not None:
            row["writeUnits"] = call.write_units
        if call.index_write_units:
            row["indexWrites"] = {
                name: {"units": units, "operations": call.index_operations.get(name, [])}
                for name, units in call.index_write_units.items()
            }
        if call.error:
            row["error"] = call.error
        row["order"] = index
        rows.append(row)
    # One job's worth: the calls of the first job of the batch are as good as any.
    return _first_job_rows(rows, per_job)


def _first_job_rows(rows: list[dict[str, Any]], per_job: float) -> list[dict[str, Any]]:
    """Collapse identical rows (same step, operation, table, units) into one with a per-job count."""
    merged: dict[str, dict[str, Any]] = {}
    for row in rows:
        key = json.dumps({k: v for k, v in row.items() if k not in {"order", "itemBytes"}}, sort_keys=True)
        if key in merged:
            merged[key]["perJob"] += per_job
            merged[key]["itemBytes"] = max(merged[key]["itemBytes"] or 0, row["itemBytes"] or 0)
        else:
            merged[key] = {**row, "perJob": per_job}
    result = sorted(merged.values(), key=lambda r: r["order"])
    for row in result:
        row.pop("order")
        row["perJob"] = round(row["perJob"], 3)
    return result


def _reported(calls: list[ApiCall]) -> dict[str, Any]:
    """What moto answered to ReturnConsumedCapacity=INDEXES, per operation (for the record)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for call in calls:
        reported = call.reported_capacity
        value = reported.get("CapacityUnits") if isinstance(reported, dict) else None
        seen[call.operation].add("none" if value is None else str(value))
    return {operation: sorted(values) for operation, values in sorted(seen.items())}


def _bytes_table(calls: list[ApiCall], per_job: float) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = defaultdict(lambda: {"requestBytes": 0.0, "responseBytes": 0.0})
    for call in calls:
        entry = table[call.service]
        entry["requestBytes"] += call.request_bytes * per_job
        entry["responseBytes"] += call.response_bytes * per_job
    return {service: {k: round(v, 1) for k, v in entry.items()} for service, entry in sorted(table.items())}


# --- timing --------------------------------------------------------------------------------


def _durations(invocations: list[Invocation], calls: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Milliseconds per invocation by function; the worker's without its model wait."""
    by_function: dict[str, list[float]] = defaultdict(list)
    for invocation in invocations:
        seconds = invocation.duration_seconds
        if invocation.function == "worker":
            seconds -= model_wait_seconds(calls, invocation.started, invocation.finished)
            by_function["worker.modelWait"].append(
                model_wait_seconds(calls, invocation.started, invocation.finished) * 1000
            )
        by_function[invocation.function].append(seconds * 1000)
    return by_function


@dataclass
class Timings:
    """Handler durations (ms) from the timing passes, by batch size."""

    samples: dict[int, dict[str, list[float]]] = field(default_factory=dict)

    def add(self, batch: int, durations: dict[str, list[float]]) -> None:
        """Fold one pass in."""
        target = self.samples.setdefault(batch, defaultdict(list))
        for name, values in durations.items():
            target[name].extend(values)

    def billed_ms(self, batch: int) -> dict[str, float]:
        """Median per invocation, rounded up to Lambda's 1 ms; API functions over every batch size."""
        result = {}
        for name in ("relay", "worker"):
            values = self.samples.get(batch, {}).get(name, [])
            if values:
                result[name] = float(math.ceil(statistics.median(values)))
        for name in ("submit", "status", "sweeper"):
            values = [v for samples in self.samples.values() for v in samples.get(name, [])]
            if values:
                result[name] = float(math.ceil(statistics.median(values)))
        return result

    def report(self) -> dict[str, Any]:
        """Medians and spread per function and batch size."""
        return {
            f"batch{batch}": {name: summary(values, 2) for name, values in sorted(samples.items())}
            for batch, samples in sorted(self.samples.items())
        }


# --- pricing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One priced line of a design."""

    service: str
    item: str
    quantity: float
    unit: str
    price_key: str
    usd_per_million: float

    def as_json(self) -> dict[str, Any]:
        """For the report."""
        return {
            "service": self.service,
            "item": self.item,
            "quantityPerJob": round(self.quantity, 6),
            "unit": self.unit,
            "price": self.price_key,
            "usdPerMillionJobs": round(self.usd_per_million, 4),
        }


def capacity_unit_hours(units: float, utilisation: float = PROVISIONED_UTILISATION) -> float:
    """Provisioned capacity-unit-hours that serve `units` request units at the target utilisation.

    One capacity unit serves one unit a second, 3,600 an hour; auto scaling keeps consumption at
    `utilisation` of what is provisioned, so each consumed unit pays for 1 / utilisation.
    """
    return units / SECONDS_PER_HOUR / utilisation


def price_lines(
    q: Quantities,
    prices: PriceTable,
    api_price: str = "apiGatewayHttpRequest",
    *,
    utilisation: float | None = None,
) -> list[Line]:
    """Every priced line of one job, in dollars per million jobs (provisioned DynamoDB capacity at
    `utilisation` when given, else on-demand request units)."""

    def line(service: str, item: str, quantity: float, unit: str, key: str, *, scale: float = 1.0) -> Line:
        return Line(service, item, quantity, unit, key, prices.cost(key, quantity * scale) * 1e6)

    api_name = "REST API" if "Rest" in api_price else "HTTP API"
    lines = [line("API Gateway", f"{api_name} requests", q.api_requests, "requests", api_price)]
    lines.append(line("Lambda", "requests", sum(q.invocations.values()), "invocations", "lambdaRequest"))
    for name, gb_seconds in sorted(q.gb_seconds.items()):
        detail = f"{q.billed_ms.get(name, 0):.0f} ms x {q.memory_mb.get(name, 0)} MB"
        if name == "worker":
            detail += ", model wait excluded"
        lines.append(
            line("Lambda", f"duration: {name} ({detail})", gb_seconds, "GB-seconds", "lambdaArmGbSecond")
        )
    if utilisation is None:
        lines += [
            line("DynamoDB", "write units: tables", q.write_units_table, "WRU", "dynamodbWriteRequestUnit"),
            line("DynamoDB", "write units: indexes", q.write_units_index, "WRU", "dynamodbWriteRequestUnit"),
            line("DynamoDB", "read units", q.read_units, "RRU", "dynamodbReadRequestUnit"),
        ]
    else:
        at = f"{q.write_units_table:g} units at {utilisation:.0%}"
        lines += [
            line(
                "DynamoDB",
                f"write capacity: tables ({at})",
                capacity_unit_hours(q.write_units_table, utilisation),
                "WCU-hours",
                "dynamodbWriteCapacityUnitHour",
            ),
            line(
                "DynamoDB",
                f"write capacity: indexes ({q.write_units_index:g} units at {utilisation:.0%})",
                capacity_unit_hours(q.write_units_index, utilisation),
                "WCU-hours",
                "dynamodbWriteCapacityUnitHour",
            ),
            line(
                "DynamoDB",
                f"read capacity ({q.read_units:g} units at {utilisation:.0%})",
                capacity_unit_hours(q.read_units, utilisation),
                "RCU-hours",
                "dynamodbReadCapacityUnitHour",
            ),
        ]
    lines += [
        line(
            "DynamoDB Streams",
            "reads by the relay's trigger (the local poller's calls; free in AWS)",
            q.stream_calls,
            "calls",
            "dynamodbStreamsReadByLambda",
        ),
        line("SQS", "requests (64 KB chunks)", q.sqs_requests, "requests", "sqsStandardRequest"),
        line("CloudWatch Logs", "ingestion", q.log_bytes, "bytes", "cloudwatchLogsIngestedGb", scale=1 / GIB),
        line("X-Ray", f"traces ({XRAY_SAMPLING_RATE:.0%} sampled)", q.traces, "traces", "xrayTraceRecorded"),
        line("Secrets Manager", "API calls", q.secrets_calls, "calls", "secretsManagerApiCall"),
        line("S3", "PUT", q.s3_puts, "requests", "s3PutRequest"),
        line("S3", "GET", q.s3_gets, "requests", "s3GetRequest"),
        line(
            "Data transfer",
            "API responses to the internet",
            q.response_bytes,
            "bytes",
            "dataTransferOutInternetGb",
            scale=1 / GIB,
        ),
    ]
    if q.transitions:
        lines.append(
            line(
                "Step Functions",
                "Standard state transitions",
                q.transitions,
                "transitions",
                "stepFunctionsStandardTransition",
            )
        )
    return lines


def _total(lines: list[Line]) -> float:
    return sum(line.usd_per_million for line in lines)


def step_functions_quantities(quiet: Quantities) -> Quantities:
    """The same job orchestrated by a Standard state machine: no relay, no queue, one worker
    invocation per job (a Lambda task, no batch), and the transitions."""
    invocations = {k: v for k, v in quiet.invocations.items() if k != "relay"}
    invocations["worker"] = 1.0
    return replace(
        quiet,
        invocations=invocations,
        stdout_bytes={k: v for k, v in quiet.stdout_bytes.items() if k != "relay"},
        sqs_requests=0.0,
        stream_calls=0.0,
        transitions=float(STEP_FUNCTIONS_TRANSITIONS),
    )


def model_wait_cost(prices: PriceTable, worker_memory_mb: int, batch: int, ratio: float) -> dict[str, Any]:
    """Dollars per million jobs for each second a job's model call keeps the worker waiting."""
    per_second = prices["lambdaArmGbSecond"].each * worker_memory_mb / 1024
    concurrent = per_second * ratio / batch * 1e6
    sequential = per_second * 1e6
    return {
        "usdPerMillionJobsPerSecondOfWait": round(concurrent, 4),
        "sequentialUsdPerMillionJobsPerSecondOfWait": round(sequential, 4),
        "concurrencyRatioUsed": round(ratio, 3),
        "batch": batch,
        "example10sCalls": {"concurrent": round(concurrent * 10, 2), "sequential": round(sequential * 10, 2)},
    }


# --- fixed monthly costs -------------------------------------------------------------------


def _metrics(h: Harness) -> list[str]:
    """Distinct custom metrics (name and service dimension) seen in the functions' EMF output."""
    found: set[str] = set()
    for phase, chunks in h.logs.kept.items():
        for line in "".join(chunks).splitlines():
            if '"_aws"' not in line:
                continue
            blob = json.loads(line)
            for directive in blob["_aws"].get("CloudWatchMetrics", []):
                for metric in directive.get("Metrics", []):
                    found.add(f"{metric['Name']}@{_function_of(phase)}")
    return sorted(found)


def _runs_per_month(h: Harness) -> float:
    for rule in h.require_template().resources("AWS::Events::Rule"):
        expression = str(rule.properties.get("ScheduleExpression", ""))
        found = _RATE.fullmatch(expression.strip())
        if found:
            minutes = int(found.group(1)) * (60 if found.group(2).startswith("hour") else 1)
            return HOURS_PER_MONTH * 60 / minutes
    return HOURS_PER_MONTH * 60.0


def fixed_monthly(h: Harness, prices: PriceTable, timings: Timings, sweep_pass: str) -> dict[str, Any]:
    """What the stack costs a month with no jobs at all (the sweeper, alarms, secrets...)."""
    count = Counter(resource.type for resource in h.require_template().resources())
    runs = _runs_per_month(h)
    sweep_calls = h.meter.calls_in(f"{sweep_pass}/sweeper")
    sweep_rru = sum(c.read_units or 0 for c in sweep_calls if c.service == "dynamodb")
    sweep_ms = timings.billed_ms(1).get("sweeper", 0.0)
    sweep_log, _ = _log_bytes(h, f"{sweep_pass}/sweeper")
    sweeper = h.functions["sweeper"]
    memory = sweeper.memory_mb
    metrics = _metrics(h)
    items = {
        "sweeper": runs
        * (
            prices.cost("lambdaRequest", 1)
            + prices.cost("lambdaArmGbSecond", sweep_ms / 1000 * memory / 1024)
            + prices.cost("dynamodbReadRequestUnit", sweep_rru)
            + prices.cost("cloudwatchLogsIngestedGb", (sweep_log + platform_log_bytes(sweeper)) / GIB)
            + prices.cost("xrayTraceRecorded", XRAY_SAMPLING_RATE if sweeper.traced else 0.0)
        ),
        "sqsIdleLongPolling": prices.cost(
            "sqsStandardRequest", IDLE_SQS_RECEIVES_PER_MINUTE * 60 * HOURS_PER_MONTH
        ),
        "secrets": prices.cost("secretsManagerSecretMonth", count["AWS::SecretsManager::Secret"]),
        "alarms": prices.cost("cloudwatchAlarmMonth", count["AWS::CloudWatch::Alarm"]),
        "dashboards": prices.cost(
            "cloudwatchDashboardMonth", max(0, count["AWS::CloudWatch::Dashboard"] - 3)
        ),
        "kmsKeys": prices.cost("kmsKeyMonth", count["AWS::KMS::Key"]),
        "customMetrics": prices.cost("cloudwatchCustomMetricMonth", len(metrics)),
    }
    return {
        "usdPerMonth": {k: round(v, 2) for k, v in items.items()},
        "totalUsdPerMonth": round(sum(items.values()), 2),
        "sweeperRunsPerMonth": round(runs),
        "sweeperReadUnitsPerRun": sweep_rru,
        "sweeperBilledMs": sweep_ms,
        "customMetricsSeen": metrics,
        "counts": {
            "secrets": count["AWS::SecretsManager::Secret"],
            "alarms": count["AWS::CloudWatch::Alarm"],
            "dashboards": count["AWS::CloudWatch::Dashboard"],
            "kmsKeys": count["AWS::KMS::Key"],
        },
    }


# --- the benchmark -------------------------------------------------------------------------


def run(
    h: Harness,
    prices: PriceTable,
    *,
    batch: int = 10,
    timing_repeats: int = 3,
    concurrency_ratio: float | None = None,
    say: Callable[[str], None] = lambda _line: None,
) -> dict[str, Any]:
    """The cost section of the report."""
    say(f"cost: warming up ({batch} jobs)")
    run_lifecycle(h, "warmup", batch)
    say("cost: accounting pass (item images on)")
    h.meter.images, h.logs.keep = True, True
    try:
        busy_run = run_lifecycle(h, f"acct{batch}", batch)
        quiet_run = run_lifecycle(h, "acct1", 1)
        run_sweep(h, "acct-sweep")
    finally:
        h.meter.images, h.logs.keep = False, False
    busy, busy_details = account(h, busy_run)
    quiet, _ = account(h, quiet_run)
    timings = Timings()
    for repeat in range(timing_repeats):
        say(f"cost: timing pass {repeat + 1}/{timing_repeats}")
        for size in (batch, 1) if repeat % 2 == 0 else (1, batch):
            lifecycle = run_lifecycle(h, f"time{size}-{repeat}", size)
            invocations = [i for i in h.invocations if i.phase.startswith(f"{lifecycle.pass_name}/")]
            timings.add(size, _durations(invocations, lifecycle.model_calls))
        run_sweep(h, f"time-sweep-{repeat}")
        timings.add(
            1, _durations([i for i in h.invocations if i.phase.startswith(f"time-sweep-{repeat}/")], [])
        )
    busy.billed_ms, quiet.billed_ms = timings.billed_ms(batch), timings.billed_ms(1)
    designs = _designs(busy, quiet, prices)
    headline = designs["httpApi"]["usdPerMillionJobs"]
    ratio = concurrency_ratio if concurrency_ratio is not None else 1.0
    result = {
        "per_million_jobs_usd": headline,
        "statusPollsPerJob": API_POLLS,
        "priceTable": {"asOf": prices.as_of, "region": prices.region},
        "batch": batch,
        "designs": designs,
        "perJob": {
            "invocations": {k: round(v, 3) for k, v in sorted(busy.invocations.items())},
            "apiRequests": busy.api_requests,
            "writeUnitsTables": round(busy.write_units_table, 3),
            "writeUnitsIndexes": round(busy.write_units_index, 3),
            "readUnits": round(busy.read_units, 3),
            "sqsRequests": round(busy.sqs_requests, 3),
            "logBytes": round(busy.log_bytes, 1),
            "apiResponseBytes": round(busy.response_bytes, 1),
            **busy_details,
        },
        "durationsMs": timings.report(),
        "billedMs": {f"batch{batch}": busy.billed_ms, "batch1": quiet.billed_ms},
        "modelWait": {
            **model_wait_cost(prices, h.functions["worker"].memory_mb, batch, ratio),
            "ratioSource": "worker.concurrency_ratio of this run"
            if concurrency_ratio is not None
            else "ideal (1.0): the worker benchmark did not run",
        },
        "fixedMonthly": fixed_monthly(h, prices, timings, "acct-sweep"),
        "provisioned": provisioned_summary(busy, prices, h),
        "memoryMb": {name: spec.memory_mb for name, spec in sorted(h.functions.items())},
    }
    finish(result)
    # Live updates beside polling: computed from these measurements and the price table.
    result["push"] = push.estimate(result, prices)
    # What a tenant's token budget adds: computed from the ledger's items and the price table.
    # Imported here, not with this module: the ledger's modules make Powertools' metrics when
    # imported, and the bench imports this module before the harness sets the functions' environment
    # (its metrics namespace among it).
    from outlast.bench import budgets  # noqa: PLC0415

    result["budgets"] = budgets.estimate(prices)
    return result


def _designs(busy: Quantities, quiet: Quantities, prices: PriceTable) -> dict[str, Any]:
    def design(
        q: Quantities, api_price: str, description: str, *, utilisation: float | None = None
    ) -> dict[str, Any]:
        lines = price_lines(q, prices, api_price, utilisation=utilisation)
        return {
            "description": description,
            "usdPerMillionJobs": round(_total(lines), 2),
            "withoutObservabilityUsdPerMillionJobs": round(
                _total([ln for ln in lines if ln.service not in {"CloudWatch Logs", "X-Ray"}]), 2
            ),
            # What INIT is priced on (apply_cold_starts): each function's invocations per job.
            "invocationsPerJob": {name: round(count, 6) for name, count in sorted(q.invocations.items())},
            "lines": [ln.as_json() for ln in lines],
        }

    return {
        "httpApi": design(busy, "apiGatewayHttpRequest", f"as built: HTTP API, batches of {busy.batch}"),
        "httpApiProvisioned": design(
            busy,
            "apiGatewayHttpRequest",
            "the same with `billingMode=provisioned`: DynamoDB capacity auto scaled at "
            f"{PROVISIONED_UTILISATION:.0%} utilisation",
            utilisation=PROVISIONED_UTILISATION,
        ),
        "httpApiQuiet": design(
            quiet, "apiGatewayHttpRequest", "as built, quiet traffic: every batch holds one job"
        ),
        "restApi": design(busy, "apiGatewayRestRequest", "the same with a REST API in front"),
        "stepFunctionsStandard": design(
            step_functions_quantities(quiet),
            "apiGatewayHttpRequest",
            f"a Standard state machine per job ({STEP_FUNCTIONS_TRANSITIONS} transitions) instead of "
            "the stream, relay and queue; one worker invocation per job",
        ),
    }


def provisioned_summary(busy: Quantities, prices: PriceTable, h: Harness) -> dict[str, Any]:
    """The provisioned option beside on demand: capacity-unit-hours per job and the idle floor."""
    write_units = busy.write_units_table + busy.write_units_index
    scaled = _scaled_resources(h)
    minimum = _STAGE.min_read_capacity * prices["dynamodbReadCapacityUnitHour"].each + (
        _STAGE.min_write_capacity * prices["dynamodbWriteCapacityUnitHour"].each
    )
    alarms = scaled * 2 * AUTO_SCALING_ALARMS_PER_TARGET
    floor = {
        "minimumCapacity": round(scaled * minimum * HOURS_PER_MONTH, 2),
        "autoScalingAlarms": round(prices.cost("cloudwatchAlarmMonth", alarms), 2),
    }
    return {
        "per_million_jobs_usd": None,  # set by finish(), from the httpApiProvisioned design
        "targetUtilisation": PROVISIONED_UTILISATION,
        "capacityUnitHoursPerJob": {
            "write": round(capacity_unit_hours(write_units), 9),
            "read": round(capacity_unit_hours(busy.read_units), 9),
        },
        "dynamodbUsdPerMillionJobs": {
            "onDemand": round(
                prices.cost("dynamodbWriteRequestUnit", write_units * 1e6)
                + prices.cost("dynamodbReadRequestUnit", busy.read_units * 1e6),
                4,
            ),
            "provisioned": round(
                prices.cost("dynamodbWriteCapacityUnitHour", capacity_unit_hours(write_units) * 1e6)
                + prices.cost("dynamodbReadCapacityUnitHour", capacity_unit_hours(busy.read_units) * 1e6),
                4,
            ),
        },
        "prices": {
            key: {"usd": prices[key].usd, "per": prices[key].per, "unit": prices[key].unit}
            for key in ("dynamodbWriteCapacityUnitHour", "dynamodbReadCapacityUnitHour")
        },
        "fixedMonthly": {
            "usdPerMonth": floor,
            "totalUsdPerMonth": round(sum(floor.values()), 2),
            "scaledResources": scaled,
            "minReadCapacity": _STAGE.min_read_capacity,
            "minWriteCapacity": _STAGE.min_write_capacity,
            "autoScalingAlarms": alarms,
        },
    }


def _scaled_resources(h: Harness) -> int:
    """Tables and global secondary indexes in the template: each is scaled on its own."""
    tables = h.require_template().resources("AWS::DynamoDB::Table")
    return sum(1 + len(t.properties.get("GlobalSecondaryIndexes", [])) for t in tables)


# --- INIT (cold starts) --------------------------------------------------------------------


@dataclass(frozen=True)
class ColdStarts:
    """What a cold start adds to an invocation's billed time, and how often one happens."""

    invocations_per_cold_start: int
    extra_ms: dict[str, float]  # per function: the median billed time a cold start adds
    source: str

    @classmethod
    def from_section(cls, coldstart: dict[str, Any] | None, every: int, source: str) -> ColdStarts:
        """From a cold-start section of the report (none, or an old one without the figure: empty)."""
        functions = (coldstart or {}).get("functions", {})
        extra = {
            name: float(data["coldExtraMs"]["median"])
            for name, data in functions.items()
            if data.get("coldExtraMs", {}).get("n")
        }
        return cls(every, extra, source if extra else "none: no cold-start section with coldExtraMs")


def _init_line(name: str, invocations: float, cold: ColdStarts, memory_mb: int, prices: PriceTable) -> Line:
    gb_seconds = invocations / cold.invocations_per_cold_start * cold.extra_ms[name] / 1000 * memory_mb / 1024
    item = (
        f"INIT: {name} (1 cold start per {cold.invocations_per_cold_start} invocations, "
        f"{cold.extra_ms[name]:.0f} ms x {memory_mb} MB)"
    )
    return Line(
        "Lambda",
        item,
        gb_seconds,
        "GB-seconds",
        "lambdaArmGbSecond",
        prices.cost("lambdaArmGbSecond", gb_seconds) * 1e6,
    )


def apply_cold_starts(cost: dict[str, Any], cold: ColdStarts, prices: PriceTable) -> None:
    """Add the INIT lines to every design and the sweeper's monthly cost, and total again.

    Since 1 August 2025 Lambda bills the INIT phase of on-demand ZIP functions on managed
    runtimes like the invocation itself (AWS Compute Blog, "AWS Lambda standardizes billing for
    INIT Phase"); a cold start's first invocation also runs the composition root and the first
    request's one-time work, which was always billed. Both are in `extra_ms`.
    """
    memory = cost["memoryMb"]
    init_usd = 0.0
    for name, design in cost["designs"].items():
        lines = [line for line in design["lines"] if not line["item"].startswith("INIT: ")]
        added = [
            _init_line(function, count, cold, memory[function], prices).as_json()
            for function, count in design["invocationsPerJob"].items()
            if function in cold.extra_ms and function in memory
        ]
        design["lines"] = lines + added
        design["usdPerMillionJobs"] = round(sum(ln["usdPerMillionJobs"] for ln in design["lines"]), 2)
        design["withoutObservabilityUsdPerMillionJobs"] = round(
            sum(
                ln["usdPerMillionJobs"]
                for ln in design["lines"]
                if ln["service"] not in {"CloudWatch Logs", "X-Ray"}
            ),
            2,
        )
        if name == "httpApi":
            init_usd = sum(ln["usdPerMillionJobs"] for ln in added)
    fixed = cost["fixedMonthly"]
    fixed["usdPerMonth"].pop("sweeperInit", None)
    if "sweeper" in cold.extra_ms:
        runs = fixed["sweeperRunsPerMonth"] / cold.invocations_per_cold_start
        seconds = runs * cold.extra_ms["sweeper"] / 1000 * memory["sweeper"] / 1024
        fixed["usdPerMonth"]["sweeperInit"] = round(prices.cost("lambdaArmGbSecond", seconds), 2)
    fixed["totalUsdPerMonth"] = round(sum(fixed["usdPerMonth"].values()), 2)
    cost["coldStarts"] = {
        "invocationsPerColdStart": cold.invocations_per_cold_start,
        "extraMsPerColdStart": dict(sorted(cold.extra_ms.items())),
        "source": cold.source,
        "usdPerMillionJobs": round(init_usd, 4),
        "billing": "INIT billed since 2025-08-01 for on-demand ZIP functions on managed runtimes "
        "(AWS Compute Blog, 'AWS Lambda standardizes billing for INIT Phase'); AWS: cold starts "
        "typically occur in under 1% of invocations",
    }
    finish(cost)


def finish(cost: dict[str, Any]) -> None:
    """The headline figures from the designs (after any INIT lines were added)."""
    cost["per_million_jobs_usd"] = cost["designs"]["httpApi"]["usdPerMillionJobs"]
    cost["provisioned"]["per_million_jobs_usd"] = cost["designs"]["httpApiProvisioned"]["usdPerMillionJobs"]
