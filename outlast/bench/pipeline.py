"""Pipeline: submit-to-terminal latency and throughput of the whole local stack over HTTP.

`outlast local up` runs in a subprocess (functions in their own processes, moto in its own),
with the zero-delay local model. Clients in this process each keep one job in flight: submit,
poll every half second until the job is terminal, submit the next (a closed loop). Latency is
read from the job's own timestamps (`createdAt` is set by the submit function, `updatedAt` by
the worker's terminal write), so polling granularity does not blur it; the client-observed
time is reported beside it.

The same run is made with about 1,000 and about 10,000 jobs already in the table. The jobs
table is seeded directly, not through the HTTP API: finished job items, in the exact shape the
repository adapter writes (`shared.adapters.dynamo_items.job_to_item`), spread over 100 owners,
written with BatchWriteItem. Their inputs and results are left out: no request path reads
another job's payload items, and every extra item makes local mode's own scans slower (below).
The seeded INSERTs still reach the relay and the worker (which drops them as already
finished); the run waits for the queue to drain before measuring.

A ratio near 1 between the two points means nothing on the request path scans or copies the
table. Two local-only costs do grow with the table, and would drown the comparison: moto
answers an index Query by walking the whole table (the sweeper makes 16 a minute, where AWS
reads only the due entries), and local mode's TTL reaper pages a full Scan on a timer (AWS
expires items in the background for free), each page re-walking the table, all under moto's
one lock. So the stack runs with both paused during the measurements (`LocalOptions`:
the reaper and the schedule once an hour), and the probes beside each point time one full Scan
and one sweeper-index Query at that size.
"""

from __future__ import annotations

import http.client
import itertools
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from outlast.bench.stats import latency_summary
from outlast.local.access import issue_token, local_client
from outlast.local.iam.enforcement import denial_count
from outlast.local.process import free_port, interrupt, start_until_ready
from outlast.local.stack import STATE_DIR, LocalOptions, LocalStack, read_state
from outlast.local.stop_signals import StopSignals
from outlast.local.synth import PROJECT_ROOT
from shared import resources as r
from shared.adapters.dynamo_items import (
    job_to_item,
)
from shared.contract import Operation
from shared.ids import new_job_id, new_sequence_id
from shared.job import JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.prompts import template_for

TERMINAL = frozenset({"Succeeded", "Failed", "Canceled"})
POLL_SECONDS = 0.5
START_TIMEOUT_SECONDS = 300
HOUSEKEEPING_PAUSE_SECONDS = 3600  # the TTL reaper and the sweeper's schedule, while measuring
RECONNECTS = 3
SEED_OWNERS = 100
BATCH_WRITE_LIMIT = 25
# The per-owner submit rate is policy, not pipeline capacity: lifted so the clients measure the latter.
STACK_ENVIRONMENT = {"SUBMITS_PER_MINUTE": "100000"}  # the settings maximum


@dataclass
class LocalStackProcess:
    """A running `outlast local up`."""

    process: subprocess.Popen[str]
    port: int
    state: dict[str, Any]

    def stop(self) -> None:
        """Ctrl-C, as a user would; kill if it hangs."""
        interrupt(self.process, timeout_seconds=60)


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def serve(port: int, context: str = "{}") -> None:
    """The child process: `outlast local up` with the housekeeping loops paused (see the module);
    `context`, as JSON: stage settings of the bench's own (then its own cloud assembly)."""
    stop = StopSignals().install()
    settings = json.loads(context)
    options = LocalOptions(
        port=port,
        environment=dict(STACK_ENVIRONMENT),
        schedule_seconds=HOUSEKEEPING_PAUSE_SECONDS,
        reap_seconds=HOUSEKEEPING_PAUSE_SECONDS,
        log=_to_stderr,
        **({"context": settings, "cdk_out": PROJECT_ROOT / "cdk.out.bench"} if settings else {}),
    )
    stack = LocalStack(options)
    try:
        stack.start()
        sys.stdout.write(f"ready: {stack.front.url}\n")
        sys.stdout.flush()
        stop.wait()
    finally:
        stack.stop()


def start_stack(say: Callable[[str], None], context: dict[str, str] | None = None) -> LocalStackProcess:
    """Start the local stack (default cloud assembly, unless `context` sets stage settings) on a free
    port and wait for `ready:`."""
    port = free_port()
    code = f"from outlast.bench.pipeline import serve; serve({port}, {json.dumps(json.dumps(context or {}))})"
    arguments = [sys.executable, "-c", code]
    STATE_DIR.mkdir(exist_ok=True)
    log = (STATE_DIR / "bench-stack.log").open("w")
    say(f"pipeline: starting the local stack on port {port} (log: .local/bench-stack.log)")
    process = start_until_ready(
        arguments,
        cwd=PROJECT_ROOT,
        stderr=log,
        timeout_seconds=START_TIMEOUT_SECONDS,
        log_hint="; see .local/bench-stack.log",
    )
    return LocalStackProcess(process=process, port=port, state=read_state(port))


# --- seeding -------------------------------------------------------------------------------


def _seed_item(index: int, now: datetime) -> dict[str, Any]:
    """A finished job of the past three weeks (its job item)."""
    job_id = new_job_id()
    created = now - timedelta(minutes=5 + index % (21 * 24 * 60))
    operation = Operation.SUMMARIZE
    job = JobRecord(
        job_id=job_id,
        tenant="seed",
        owner=f"owner-{index % SEED_OWNERS:03d}",
        operation=operation,
        status=JobStatus.SUCCEEDED,
        created_at=created,
        updated_at=created + timedelta(seconds=3),
        expires_at=created + timedelta(days=30),
        attempts=1,
        usage=Usage(input_tokens=120, output_tokens=40),
        sequence_id=new_sequence_id(),
        model="gpt-4o-mini",
        prompt_version=template_for(operation).version,
        input_location="item",
        max_attempts=3,
        dispatch_at=created,
        result_location="item",
    )
    return job_to_item(job, sweep_at=None)


def seed(stack: LocalStackProcess, table: str, start: int, stop: int) -> float:
    """Write job items `start`..`stop`-1 with BatchWriteItem; seconds taken."""
    dynamodb = local_client("dynamodb", stack.state)
    now = datetime.now(UTC)
    began = time.monotonic()
    pending: list[dict[str, Any]] = []
    for index in range(start, stop):
        pending.append({"PutRequest": {"Item": _seed_item(index, now)}})
        while len(pending) >= BATCH_WRITE_LIMIT:
            _write(dynamodb, table, pending[:BATCH_WRITE_LIMIT])
            pending = pending[BATCH_WRITE_LIMIT:]
    if pending:
        _write(dynamodb, table, pending)
    return time.monotonic() - began


def _write(dynamodb: Any, table: str, requests: list[dict[str, Any]]) -> None:
    for _ in range(10):
        unprocessed = dynamodb.batch_write_item(RequestItems={table: requests}).get("UnprocessedItems", {})
        requests = unprocessed.get(table, [])
        if not requests:
            return
        time.sleep(0.1)
    raise RuntimeError("BatchWriteItem kept leaving items unprocessed")


def _queue_depth(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def drain(stack: LocalStackProcess, quiet_seconds: float = 5.0, timeout_seconds: float = 900.0) -> float:
    """Wait until the relay and worker have dealt with the seeded INSERTs (the queue stays empty)."""
    sqs = local_client("sqs", stack.state)
    url = next(u for logical_id, u in stack.state["queues"].items() if "JobsQueue" in logical_id)
    began = time.monotonic()
    empty_since: float | None = None
    while time.monotonic() - began < timeout_seconds:
        now = time.monotonic()
        if _queue_depth(sqs, url) == 0:
            empty_since = empty_since or now
            if now - empty_since >= quiet_seconds and now - began >= quiet_seconds:
                return now - began - quiet_seconds
        else:
            empty_since = None
        time.sleep(0.5)
    raise RuntimeError("the seeded jobs never drained from the queue")


def probes(stack: LocalStackProcess, table: str) -> dict[str, float]:
    """How long table-sized operations take on moto at this size (milliseconds)."""
    dynamodb = local_client("dynamodb", stack.state)
    began = time.perf_counter()
    count = 0
    arguments: dict[str, Any] = {"TableName": table, "Select": "COUNT"}
    while True:
        page = dynamodb.scan(**arguments)
        count += int(page["Count"])
        if "LastEvaluatedKey" not in page:
            break
        arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    scanned = time.perf_counter()
    dynamodb.query(
        TableName=table,
        IndexName=r.SWEEP_INDEX,
        KeyConditionExpression="#s = :s",
        ExpressionAttributeNames={"#s": r.SWEEP_INDEX_PARTITION},
        ExpressionAttributeValues={":s": {"S": "0"}},
        Limit=62,
    )
    queried = time.perf_counter()
    dynamodb.get_item(TableName=table, Key={r.PARTITION_KEY: {"S": "JOB#none"}, r.SORT_KEY: {"S": "JOB"}})
    got = time.perf_counter()
    return {
        "itemsInTable": count,
        "fullScanMs": round((scanned - began) * 1000, 1),
        "sweepIndexQueryMs": round((queried - scanned) * 1000, 1),
        "getItemMs": round((got - queried) * 1000, 1),
    }


# --- load ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One job as a client saw it."""

    status: str
    created_at: datetime
    updated_at: datetime
    client_seconds: float
    submit_seconds: float
    polls: int


@dataclass
class Load:
    """Shared state of the client threads."""

    total: int
    tickets: itertools.count[int] = field(default_factory=itertools.count)
    lock: threading.Lock = field(default_factory=threading.Lock)
    outcomes: list[Outcome] = field(default_factory=list)
    throttled: int = 0
    reconnects: int = 0
    errors: list[str] = field(default_factory=list)

    def take(self) -> bool:
        """A ticket for one more job, while there are any."""
        with self.lock:
            return next(self.tickets) < self.total


def _iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class _Client:
    """One closed-loop client: one job in flight at a time, over a keep-alive connection."""

    def __init__(self, port: int, token: str, load: Load) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.token = token
        self.load = load

    def _call(self, method: str, path: str, body: Any = None, key: str | None = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.token}"}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body), "application/json"
        if key is not None:
            headers["Idempotency-Key"] = key
        reconnects = 0
        while True:
            try:
                self.connection.request(method, path, body=data, headers=headers)
                response = self.connection.getresponse()
                raw = response.read()
            except (ConnectionError, http.client.HTTPException):
                # A kept-alive connection the server dropped: send again on a new one. Safe for
                # GET, and for POST too: the same Idempotency-Key gets the same job.
                self.connection.close()
                reconnects += 1
                with self.load.lock:
                    self.load.reconnects += 1
                if reconnects > RECONNECTS:
                    raise
                continue
            if response.status != 429:
                return response.status, json.loads(raw) if raw else None
            with self.load.lock:
                self.load.throttled += 1
            time.sleep(0.2)

    def run(self) -> None:
        while self.load.take():
            try:
                self.load.outcomes.append(self._one())
            except Exception as error:  # noqa: BLE001 - counted and reported, the run goes on
                with self.load.lock:
                    self.load.errors.append(f"{type(error).__name__}: {error}")
                self.connection.close()

    def _one(self) -> Outcome:
        began = time.monotonic()
        body = {"operation": "summarize", "input": {"text": "Pipeline benchmark. A short text to summarize."}}
        status, document = self._call("POST", "/v1/jobs", body, key=f"bench-{uuid.uuid4()}")
        if status != 202:
            raise RuntimeError(f"submit answered {status}: {document}")
        submitted = time.monotonic()
        polls = 0
        while document["status"] not in TERMINAL:
            time.sleep(POLL_SECONDS)
            status, document = self._call("GET", f"/v1/jobs/{document['jobId']}")
            polls += 1
            if status != 200:
                raise RuntimeError(f"status answered {status}: {document}")
        return Outcome(
            status=document["status"],
            created_at=_iso(document["createdAt"]),
            updated_at=_iso(document["updatedAt"]),
            client_seconds=time.monotonic() - began,
            submit_seconds=submitted - began,
            polls=polls,
        )


def measure(stack: LocalStackProcess, tokens: list[str], jobs: int) -> dict[str, Any]:
    """Run `jobs` jobs through the stack with one closed-loop client per token."""
    load = Load(total=jobs)
    clients = [_Client(stack.port, token, load) for token in tokens]
    threads = [threading.Thread(target=c.run, name=f"bench-client-{i}") for i, c in enumerate(clients)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - began
    done = [o for o in load.outcomes if o.status == "Succeeded"]
    server = [(o.updated_at - o.created_at).total_seconds() for o in done]
    span = (
        (max(o.updated_at for o in done) - min(o.created_at for o in done)).total_seconds() if done else 0.0
    )
    return {
        # Failed requests mean the machine was overloaded (functions timed out), not a pipeline number.
        "valid": not load.errors and len(done) == jobs,
        "jobs": jobs,
        "succeeded": len(done),
        "notSucceeded": len(load.outcomes) - len(done),
        "errors": load.errors[:5],
        "errorCount": len(load.errors),
        "throttledRequests": load.throttled,
        "reconnects": load.reconnects,
        "clients": len(clients),
        "latencySeconds": latency_summary(server, 3),
        "clientObservedSeconds": latency_summary([o.client_seconds for o in done], 3),
        "submitAnswerSeconds": latency_summary([o.submit_seconds for o in done], 3),
        "throughputJobsPerSecond": round(len(done) / span, 2) if span else 0.0,
        "clientWallSeconds": round(wall, 1),
    }


def run(
    *,
    points: tuple[int, ...] = (1000, 10000),
    jobs: int = 300,
    clients: int = 24,
    say: Callable[[str], None] = lambda _line: None,
) -> dict[str, Any]:
    """The pipeline section of the report."""
    stack = start_stack(say)
    try:
        table = next(name for logical_id, name in stack.state["tables"].items() if "JobsTable" in logical_id)
        say(f"pipeline: signing in {clients} users")
        tokens = [issue_token(stack.state, f"bench-{i:02d}", "bench") for i in range(clients)]
        # Each local function pool starts its processes on first use; a cold one can time out.
        say("pipeline: warming up the function processes (not measured)")
        warmup = measure(stack, tokens, 2 * clients)
        results = []
        seeded = 0
        for point in points:
            say(f"pipeline: seeding the jobs table to {point} jobs")
            seed_seconds = seed(stack, table, seeded, point)
            seeded = point
            drain_seconds = drain(stack)
            probe = probes(stack, table)
            say(f"pipeline: {jobs} jobs with {point} in the table ({clients} clients)")
            measured = measure(stack, tokens, jobs)
            results.append(
                {
                    "seededJobs": point,
                    "seedSeconds": round(seed_seconds, 1),
                    "drainSeconds": round(drain_seconds, 1),
                    "probes": probe,
                    **measured,
                }
            )
    finally:
        stack.stop()
    denied = denial_count(stack.state)
    first, last = results[0], results[-1]
    comparable = first["valid"] and last["valid"]
    return {
        "warmup": {
            "jobs": warmup["jobs"],
            "succeeded": warmup["succeeded"],
            "errorCount": warmup["errorCount"],
        },
        "points": results,
        "ratios": {
            "description": f"{last['seededJobs']} jobs in the table vs {first['seededJobs']}",
            "comparable": comparable,
            "latencyP50": _ratio(
                last["latencySeconds"].get("p50"), first["latencySeconds"].get("p50"), comparable
            ),
            "latencyP99": _ratio(
                last["latencySeconds"].get("p99"), first["latencySeconds"].get("p99"), comparable
            ),
            "throughput": _ratio(
                last["throughputJobsPerSecond"], first["throughputJobsPerSecond"], comparable
            ),
        },
        "model": "local model server, zero delay",
        "iamDenials": denied,  # calls a function's role did not allow: must be 0
        "housekeepingPausedSeconds": HOUSEKEEPING_PAUSE_SECONDS,
        "reaperDefaultSeconds": LocalOptions().reap_seconds,
        "pollSeconds": POLL_SECONDS,
        "method": "Closed loop: each client submits, polls every "
        f"{POLL_SECONDS} s until terminal, repeats; latency = updatedAt - createdAt of each job; "
        "throughput = jobs / (last terminal write - first submit)",
    }


def _ratio(numerator: float | None, denominator: float | None, comparable: bool) -> float | None:
    if not comparable or not numerator or not denominator:
        return None
    return round(numerator / denominator, 2)
