"""Cold start: a fresh Python process per run, from spawn to the function's first answer.

Each run spawns `python -c` with the function's environment (from the template, pointed at
the benchmark's moto and model server), imports the handler module, runs its composition root,
invokes it once with its event (the API functions' from events/*.json) and records when the
answer came back; then it invokes it once more, warm, as the yardstick of what the first
invocation paid only once. `coldExtraMs`, interpreter start + import + composition root + the
first invocation's excess over the warm one, is what a cold start adds to the billed duration:
the cost section prices it (Lambda bills INIT since August 2025). The
baseline is the least any function could do: import boto3, create a client, make one call.
Each design's floor (`FLOORS`) is the least a function of that design could do: the libraries
it prescribes and the first request's essential calls, none of the project's code. Functions,
floors and the baseline take turns (round-robin, the order rotating each round), so a busy
moment of the machine is shared out; the report gives medians and the ratio to the baseline.

Each child looks like a Lambda execution environment to the libraries it imports: it runs in
the function's code asset from the cloud assembly (with its bytecode, as in /var/task) and gets
the variables the Lambda Python runtime sets (`LAMBDA_TASK_ROOT`, `AWS_EXECUTION_ENV`,
`AWS_LAMBDA_FUNCTION_NAME`, `AWS_LAMBDA_RUNTIME_API`, `_X_AMZN_TRACE_ID`, the log format and
level of its LoggingConfig, ...). Without them aws-xray-sdk, imported by every function through
Powertools' tracer, sees no `LAMBDA_TASK_ROOT` and builds its centralized sampler and that
sampler's X-Ray client at import, which no function does in Lambda. The baseline gets the same
variables (the status function's), so the ratio still compares like with like. The tracer is as
the template deploys it (`child_environment`): off on the API functions (unless `apiTracing`),
on for the relay, the worker and the sweeper, whose numbers include importing aws-xray-sdk and
patching at import (the trace header says `Sampled=0`, so no segment is sent). The Lambda
runtime client itself (awslambdaric) is not started: it costs every function alike, the
baseline included.

This is a local proxy: interpreter start, imports and client creation on this machine's CPU,
and the first request against moto. Lambda adds its own sandbox start and runs on a fraction
of a vCPU at 256-512 MB, so absolute times differ; the ratios say what the code adds.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from infra.packaging import PYTHON_VERSION
from outlast.bench.events import EVENTS_DIR
from outlast.bench.harness import FunctionSpec, Harness
from outlast.bench.stats import summary
from outlast.local.event_sources import scheduled_event
from outlast.local.lambda_runtime import host_environment
from shared.adapters.dynamo_items import idempotency_key, job_key
from shared.adapters.sqs_queue import encode_message
from shared.ports import JobMessage
from shared.resources import ENV_IDEMPOTENCY_TABLE, ENV_OPENAI_SECRET

BASELINE = "baseline"
# The least a function of each design could do, measured like the functions (`CHILD`): the
# libraries the design prescribes, set up as deployed, and the first request's essential calls.
# The API floor: Powertools' logger, metrics and HTTP resolver with validation, answering the
# status function's request on one route whose response is one pydantic model, after one
# get_item (in the status function's environment: tracer off). The worker floor:
# Powertools' logger, metrics and tracer patching botocore (on, as the worker is deployed), the
# openai SDK, and a job's four essential requests: a claim (an UpdateItem), the API key from
# Secrets Manager (a client of its own), the chat completion, the terminal write. What a function
# measures above its floor is its own code and its extra requests; a target under the floor
# cannot be met by any code.
FLOORS = {"apiFloor": "status", "workerFloor": "worker"}
# The libraries (distributions) each floor loads: those the functions of its design import today,
# at the versions the lock pins (requirements/*.txt: the environment the children run in is
# installed from it). Written down here, never read from what the functions import: a library a
# function adds later is that function's cost, not its floor's. A test checks that a floor loads
# nothing its functions do not.
FLOOR_LIBRARIES = {
    "apiFloor": ("aws-lambda-powertools", "pydantic", "boto3"),
    "workerFloor": ("aws-lambda-powertools", "aws-xray-sdk", "openai", "pydantic", "boto3"),
}
FUNCTIONS = ("submit", "status", "relay", "worker", "sweeper")


@dataclass(frozen=True)
class ColdStartTarget:
    """DESIGN.md, "Cost discipline" (restated): a function's spawn-to-answer time at most `factor`
    times its reference's, both measured in the same run: its design's floor, or the bare baseline."""

    reference: str  # a FLOORS name, or BASELINE
    factor: float


# Submit and status at most 0.25x above the API floor, the worker 0.35x above the worker floor,
# the relay at most 1.3x the bare baseline. The sweeper has none (it runs on a schedule).
TARGETS = {
    "submit": ColdStartTarget("apiFloor", 1.25),
    "status": ColdStartTarget("apiFloor", 1.25),
    "worker": ColdStartTarget("workerFloor", 1.35),
    "relay": ColdStartTarget(BASELINE, 1.3),
}


def target_verdict(
    target: ColdStartTarget, median_ms: float, reference_ms: float, cpu_ratio: float | None = None
) -> dict[str, Any]:
    """A function's target as the report records it: against what, the spawn-to-answer ratio
    measured, and whether it was met (a miss is flagged in the report); `cpuRatio`, the child's CPU
    time over the reference's, tells a busy machine's miss from the code's."""
    ratio = round(median_ms / reference_ms, 2)
    verdict: dict[str, Any] = {
        "reference": target.reference,
        "factor": target.factor,
        "ratio": ratio,
        "met": ratio <= target.factor,
    }
    return verdict if cpu_ratio is None else verdict | {"cpuRatio": round(cpu_ratio, 2)}


SAMPLE_SUB = "3b7c1d2e-8f4a-4c6b-9d1e-2f3a4b5c6d7e"  # the caller in events/*.json
RUN_TIMEOUT_SECONDS = 120
# Where the children are told the Runtime API and the X-Ray daemon are (nothing is sent to either:
# the child calls the handler itself and the tracer is disabled); loopback, like everything here.
RUNTIME_API = "127.0.0.1:9001"
XRAY_DAEMON = "127.0.0.1:2000"

# The child: everything it does between its first line and the first answer is what is measured.
# The handler's own composition root (`build_dependencies(<Settings>.from_environ())`, cached) is
# run first on its own, so its time is told apart from the first request's; the handler then finds
# it cached, as every later invocation does. A second, warm invocation in the same process is the
# yardstick of what the first one paid once.
CHILD = r"""
import time
started_wall = time.time()
started = time.perf_counter()
import importlib, json, os
config = json.loads(os.environ["OUTLAST_BENCH_CHILD"])


def event_of(spec):
    event = spec.get("event")
    if event is None:
        with open(spec["eventFile"]) as handle:
            event = json.load(handle)
        for path, value in spec["patch"]:
            target = event
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
    return event


events = [event_of(spec) for spec in config.get("invocations", [])]
before_import = time.perf_counter()
if config["kind"] == "baseline":
    import boto3
    imported = time.perf_counter()
    client = boto3.client("dynamodb")
    composed = time.perf_counter()
    ok = "ResponseMetadata" in client.get_item(**config["call"])
    done = time.perf_counter()
    done_wall = time.time()
    warm_ok = "ResponseMetadata" in client.get_item(**config["call"])
elif config["kind"] == "apiFloor":
    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
    from pydantic import BaseModel
    import boto3

    class Answer(BaseModel):
        found: bool

    logger, metrics, app = Logger(), Metrics(), APIGatewayHttpResolver(enable_validation=True)

    @app.get("/v1/jobs/<job_id>")
    def get_job(job_id: str) -> Answer:
        return Answer(found="Item" in client.get_item(**config["call"]))

    imported = time.perf_counter()
    client = boto3.client("dynamodb")
    composed = time.perf_counter()

    def answer(index):
        return app.resolve(events[index], None)["statusCode"] == 200

    ok = answer(0)
    done = time.perf_counter()
    done_wall = time.time()
    warm_ok = answer(1)
elif config["kind"] == "workerFloor":
    from aws_lambda_powertools import Logger, Metrics, Tracer
    import boto3

    logger, metrics, tracer = Logger(), Metrics(), Tracer(patch_modules=("botocore",))
    imported = time.perf_counter()
    client = boto3.client("dynamodb")
    composed = time.perf_counter()

    models = []  # the secret and the client are made on the first job, then kept, as the worker does

    def answer():
        # A job's four essential requests: claim, API key (the first time, through Powertools'
        # Parameters, as DESIGN.md prescribes), model call, terminal write.
        client.update_item(**config["write"])
        if not models:
            import openai
            from aws_lambda_powertools.utilities.parameters import SecretsProvider

            secrets = SecretsProvider(boto3_client=boto3.client("secretsmanager"))
            key = secrets.get(config["secret"], max_age=300)
            models.append(openai.OpenAI(api_key=key, base_url=config["modelUrl"], max_retries=0))
        chat = models[0].chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Summarize: it is short."}]
        )
        client.update_item(**config["write"])
        return bool(chat.choices[0].message.content)

    ok = answer()
    done = time.perf_counter()
    done_wall = time.time()
    warm_ok = answer()
else:
    module = importlib.import_module(config["module"])
    imported = time.perf_counter()
    settings = next(
        value for name, value in vars(module).items()
        if name.endswith("Settings") and getattr(value, "__module__", "") == config["settingsModule"]
    )
    module.build_dependencies(settings.from_environ())
    composed = time.perf_counter()

    class Context:
        function_name = config["functionName"]
        memory_limit_in_mb = config["memoryMb"]
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:" + config["functionName"]

        def __init__(self, request_id):
            self.aws_request_id = request_id

        @staticmethod
        def get_remaining_time_in_millis():
            return int(config["timeoutSeconds"] * 1000 - (time.perf_counter() - started) * 1000)

    def invoke(index):
        answer = module.lambda_handler(events[index], Context(config["invocations"][index]["requestId"]))
        if "statusCode" in answer:
            return answer["statusCode"] in (200, 202)
        return not answer.get("batchItemFailures")

    ok = invoke(0)
    done = time.perf_counter()
    done_wall = time.time()
    warm_ok = invoke(1)
warm_done = time.perf_counter()
with open(config["out"], "w") as handle:
    json.dump({"ok": ok and warm_ok, "startedWall": started_wall, "doneWall": done_wall,
               "importSeconds": imported - before_import, "compositionSeconds": composed - imported,
               "invokeSeconds": done - composed, "warmInvokeSeconds": warm_done - done,
               "scriptSeconds": done - started}, handle)
"""


def _api_patch(path: str, job_id: str | None = None, key: str | None = None) -> list[Any]:
    patch: list[Any] = [[["requestContext", "requestId"], f"cold-{uuid.uuid4().hex[:12]}"]]
    if job_id is not None:
        patch += [
            [["rawPath"], path],
            [["requestContext", "http", "path"], path],
            [["pathParameters", "jobId"], job_id],
        ]
    if key is not None:
        patch.append([["headers", "idempotency-key"], key])
    return patch


def _sqs_event(h: Harness, job_id: str) -> dict[str, Any]:
    body = encode_message(JobMessage(job_id=job_id, trace_id=uuid.uuid4().hex))
    arn = h.worker_source.queue_arn
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": uuid.uuid4().hex,
                "body": body,
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": str(int(time.time() * 1000))},
                "messageAttributes": {},
                "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": "us-east-1",
            }
        ]
    }


def _stream_event(h: Harness, job_id: str) -> dict[str, Any]:
    item = h.raw_dynamodb.get_item(TableName=h.jobs_table, Key=job_key(job_id))["Item"]
    return {
        "Records": [
            {
                "eventID": uuid.uuid4().hex,
                "eventName": "INSERT",
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {
                    "ApproximateCreationDateTime": int(time.time()),
                    "Keys": job_key(job_id),
                    "NewImage": item,
                    "SequenceNumber": str(10**20 + int(time.time() * 1000)),
                    "SizeBytes": 600,
                    "StreamViewType": "NEW_IMAGE",
                },
                "eventSourceARN": h.relay_source.stream_arn,
            }
        ]
    }


def lambda_variables(spec: FunctionSpec) -> dict[str, str]:
    """What the Lambda Python runtime sets in a function's environment (AWS's reserved variables)."""
    trace = f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};Parent={uuid.uuid4().hex[:16]};Sampled=0"
    variables = {
        "_HANDLER": spec.handler,
        "_X_AMZN_TRACE_ID": trace,
        "LAMBDA_TASK_ROOT": str(spec.code_dir),
        "AWS_EXECUTION_ENV": f"AWS_Lambda_python{PYTHON_VERSION}",
        "AWS_LAMBDA_RUNTIME_API": RUNTIME_API,
        "AWS_LAMBDA_FUNCTION_NAME": f"outlast-{spec.logical_id}",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/outlast-{spec.logical_id}",
        "AWS_LAMBDA_LOG_STREAM_NAME": f"2026/01/01/[$LATEST]{uuid.uuid4().hex}",
        "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        "AWS_XRAY_DAEMON_ADDRESS": XRAY_DAEMON,
    }
    if spec.log_format is not None:
        variables["AWS_LAMBDA_LOG_FORMAT"] = spec.log_format
    if spec.log_level is not None:
        variables["AWS_LAMBDA_LOG_LEVEL"] = spec.log_level
    return variables


def child_environment(environment: dict[str, str], spec: FunctionSpec) -> dict[str, str]:
    """A function's local environment, as its template deploys it, plus the Lambda runtime's.

    Local mode turns the tracer off everywhere (no X-Ray daemon); a traced function is measured
    as deployed, tracer on: it imports aws-xray-sdk and patches botocore at import, as in Lambda.
    The runtime's trace header says `Sampled=0`, so no segment is sent anywhere.
    """
    variables = {**environment, **lambda_variables(spec)}
    if spec.traced and "POWERTOOLS_TRACE_DISABLED" not in spec.environment:
        variables.pop("POWERTOOLS_TRACE_DISABLED", None)
    return variables


class _Runs:
    """Builds each child's configuration: fresh jobs, keys and request ids per run."""

    def __init__(self, h: Harness, runs: int, workdir: Path) -> None:
        self.h = h
        self.workdir = workdir
        self.status_job = h.submit("Cold start status probe. It exists.", SAMPLE_SUB)
        # Two jobs a run: the worker's cold invocation works one, its warm invocation the other.
        self.worker_jobs = [
            h.submit(f"Cold start worker job {i}. It is short.", SAMPLE_SUB) for i in range(2 * runs)
        ]
        self.table = h.jobs_table
        self.probe_key = job_key(self.status_job)

    def config(self, name: str, run: int) -> tuple[dict[str, Any], dict[str, str]]:
        out = str(self.workdir / f"{name}-{run}.json")
        if name == BASELINE or name in FLOORS:
            # The baseline and the API floor in the status function's environment, the worker
            # floor in the worker's (its tracer on, as deployed).
            function = FLOORS.get(name, "status")
            spec = self.h.functions[function]
            environment = self.h.function_environment(function)
            reference: dict[str, Any] = {
                "kind": name,
                "out": out,
                "cwd": str(spec.code_dir),
                "call": {"TableName": self.table, "Key": self.probe_key, "ConsistentRead": True},
            }
            if name == "apiFloor":  # it answers the status function's requests, on one route
                reference["invocations"] = [self._invocation("status", run, warm) for warm in (False, True)]
            if name == "workerFloor":
                reference |= self._worker_floor(environment, run)
            return reference, child_environment(environment, spec)
        spec = self.h.functions[name]
        config: dict[str, Any] = {
            "kind": "function",
            "module": spec.module,
            "settingsModule": f"{spec.module.rsplit('.', 1)[0]}.settings",
            "out": out,
            "cwd": str(spec.code_dir),
            "functionName": f"outlast-{spec.logical_id}",
            "memoryMb": spec.memory_mb,
            "timeoutSeconds": spec.timeout_seconds,
            "invocations": [self._invocation(name, run, warm) for warm in (False, True)],
        }
        return config, child_environment(self.h.function_environment(name), spec)

    def _worker_floor(self, environment: dict[str, str], run: int) -> dict[str, Any]:
        """Where the worker floor's requests go: the model server, the API key's secret, and a
        scratch item written as a claim and a terminal write are (an idempotency-table item, so
        that no stream consumer ever takes it for a job)."""
        table = self.h.function_environment("status")[ENV_IDEMPOTENCY_TABLE]
        return {
            "modelUrl": environment["OPENAI_BASE_URL"],
            "secret": environment[ENV_OPENAI_SECRET],
            "write": {
                "TableName": table,
                "Key": idempotency_key(f"cold-start-floor-{run}"),
                "UpdateExpression": "SET #s = :s",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {":s": {"S": "Running"}},
            },
        }

    def _invocation(self, name: str, run: int, warm: bool) -> dict[str, Any]:
        """The event of the cold (first) or the warm (second) invocation of one run."""
        invocation: dict[str, Any] = {"requestId": str(uuid.uuid4())}
        if name == "submit":
            invocation["eventFile"] = str(EVENTS_DIR / "submit.json")
            invocation["patch"] = _api_patch("/v1/jobs", key=f"cold-{uuid.uuid4()}")
        elif name == "status":
            invocation["eventFile"] = str(EVENTS_DIR / "get_status.json")
            invocation["patch"] = _api_patch(f"/v1/jobs/{self.status_job}", job_id=self.status_job)
        elif name == "relay":
            invocation["event"] = _stream_event(self.h, self.worker_jobs[2 * run + warm])
        elif name == "worker":
            invocation["event"] = _sqs_event(self.h, self.worker_jobs[2 * run + warm])
        else:
            invocation["event"] = scheduled_event()
        return invocation


def _spawn(config: dict[str, Any], environment: dict[str, str]) -> dict[str, Any]:
    env = {
        **host_environment(),
        **environment,
        "OUTLAST_BENCH_CHILD": json.dumps(config),
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", "1"),
    }
    # The benchmark's servers are threads of this process: the only child reaped meanwhile is this one.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    spawned = time.time()
    completed = subprocess.run(  # noqa: S603 - our own interpreter and a fixed script
        [sys.executable, "-c", CHILD],
        cwd=config["cwd"],  # Lambda's working directory is the code's: the handler imports from it
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"cold start child failed: {completed.stderr.decode()[-2000:]}")
    result: dict[str, Any] = json.loads(Path(config["out"]).read_text())
    if not result["ok"]:
        raise RuntimeError(f"cold start child answered with a failure: {config.get('module', BASELINE)}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["cpuSeconds"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    result["spawnToAnswerSeconds"] = result["doneWall"] - spawned
    result["interpreterStartSeconds"] = result["startedWall"] - spawned
    return result


def run(h: Harness, *, runs: int = 7, say: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    """The cold start section of the report."""
    names = [BASELINE, *FLOORS, *FUNCTIONS]
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="outlast-bench-") as workdir:
        plan = _Runs(h, runs, Path(workdir))
        for run_index in range(runs):
            say(f"coldstart: round {run_index + 1}/{runs}")
            shift = run_index % len(names)
            for name in names[shift:] + names[:shift]:
                config, environment = plan.config(name, run_index)
                samples[name].append(_spawn(config, environment))
    baseline = statistics.median(s["spawnToAnswerSeconds"] for s in samples[BASELINE])
    baseline_cpu = statistics.median(s["cpuSeconds"] for s in samples[BASELINE])
    report: dict[str, Any] = {}
    for name in names:
        runs_of = samples[name]
        spawn_to_answer = [s["spawnToAnswerSeconds"] * 1000 for s in runs_of]

        def ms(key: str, runs_of: list[dict[str, Any]] = runs_of) -> dict[str, Any]:
            return summary([s[key] * 1000 for s in runs_of], 1)

        report[name] = {
            "spawnToAnswerMs": summary(spawn_to_answer, 1),
            "interpreterStartMs": ms("interpreterStartSeconds"),
            "importMs": ms("importSeconds"),
            "compositionMs": ms("compositionSeconds"),
            "firstInvokeMs": ms("invokeSeconds"),
            "warmInvokeMs": ms("warmInvokeSeconds"),
            "initMs": summary(
                [(s["interpreterStartSeconds"] + s["importSeconds"]) * 1000 for s in runs_of], 1
            ),
            "coldExtraMs": summary([cold_extra_ms(s) for s in runs_of], 1),
            "ratioToBaseline": round(statistics.median(spawn_to_answer) / (baseline * 1000), 2),
            # The child's CPU time (both invocations): steadier than wall time on a busy machine.
            "cpuMs": ms("cpuSeconds"),
            "cpuRatioToBaseline": round(
                statistics.median(s["cpuSeconds"] for s in runs_of) / baseline_cpu, 2
            ),
        }
    for name, target in TARGETS.items():
        reference = statistics.median(s["spawnToAnswerSeconds"] for s in samples[target.reference])
        median = statistics.median(s["spawnToAnswerSeconds"] for s in samples[name])
        cpu = statistics.median(s["cpuSeconds"] for s in samples[name])
        cpu_ratio = cpu / statistics.median(s["cpuSeconds"] for s in samples[target.reference])
        report[name]["target"] = target_verdict(target, median, reference, cpu_ratio)
    floors = {name: report.pop(name) | {"libraries": library_versions(name)} for name in FLOORS}
    return {
        "runsPerFunction": runs,
        "baseline": report.pop(BASELINE),
        "floors": floors,
        "functions": report,
        "method": "fresh `python -c` per run in the function's code asset with the Lambda runtime's "
        "variables (LAMBDA_TASK_ROOT and the rest): import the handler module, run its composition root "
        "(`build_dependencies(<Settings>.from_environ())`), build the event (events/*.json for the API "
        "functions), invoke once against moto, then once more warm; spawn-to-answer wall time of the "
        "first answer, functions, the two designs' floors and a `boto3.client('dynamodb').get_item` "
        "baseline interleaved round-robin; medians",
    }


def library_versions(floor: str) -> dict[str, str]:
    """The versions of a floor's libraries in the environment the children run in (the lock's)."""
    return {name: metadata.version(name) for name in FLOOR_LIBRARIES[floor]}


def cold_extra_ms(sample: dict[str, Any]) -> float:
    """What one cold start adds to the billed time: INIT (interpreter start and the handler's
    import, Lambda's Init Duration), the composition root, and the first invocation's excess over
    the warm one (first connections, lazy imports); each is billed since INIT is (August 2025)."""
    excess = max(0.0, float(sample["invokeSeconds"]) - float(sample["warmInvokeSeconds"]))
    seconds = sum(
        float(sample[key]) for key in ("interpreterStartSeconds", "importSeconds", "compositionSeconds")
    )
    return round((seconds + excess) * 1000, 3)
