"""`make demo`: start the local stack, run a handful of jobs through the HTTP API, show them, stop.

Each job shows one promise: a success per operation (extract's a JSON object that matches its
schema), one that succeeds after two 429s from the
provider, one that fails for a terminal reason (with a safe error code), one canceled while it
runs, and a 200 KB document summarized in checkpointed steps, its progress shown as it moves.
Everything goes through the same handlers and HTTP API as in AWS, each function under its own
role from the template: the demo ends by saying how many calls a role denied (it must be 0).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from dataclasses import dataclass

from outlast.api.http import HttpApi, JsonObject
from outlast.documents import long_document
from outlast.local.access import issue_token
from outlast.local.stack import LocalOptions, LocalStack

TERMINAL = {"Succeeded", "Failed", "Canceled"}
POLL_TIMEOUT_SECONDS = 180


@dataclass(frozen=True)
class DemoJob:
    """One job of the demo and what it shows."""

    title: str
    request: JsonObject
    cancel_when_running: bool = False


JOBS = (
    DemoJob(
        "summarize",
        {
            "operation": "summarize",
            "input": {
                "text": "Outlast runs LLM work that must outlive the HTTP request. The client gets a "
                "status URL at once. Retries and crashes are part of the contract."
            },
        },
    ),
    DemoJob(
        "analyze",
        {
            "operation": "analyze",
            "input": {"text": "Quarterly revenue grew while costs stayed flat. Margins rose."},
        },
    ),
    DemoJob(
        "classify",
        {
            "operation": "classify",
            "input": {"text": "My invoice was charged twice and I need a refund for the billing error."},
            "options": {"labels": ["billing", "shipping", "technical"]},
        },
    ),
    DemoJob(
        "extract (JSON)",
        {
            "operation": "extract",
            "input": {"text": "Acme Tools invoiced 3 hammers on 2 May; the invoice is unpaid."},
            "options": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "vendor": {"type": "string"},
                        "items": {"type": "integer"},
                        "paid": {"type": "boolean"},
                    },
                    "required": ["vendor", "items", "paid"],
                    "additionalProperties": False,
                }
            },
        },
    ),
    DemoJob(
        "retried after two 429s",
        {
            "operation": "summarize",
            "input": {"text": "The provider is busy at first. [[fault:rate_limit*2]]"},
        },
    ),
    DemoJob(
        "terminal failure",
        {
            "operation": "summarize",
            "input": {"text": "Content the provider refuses. [[fault:content_policy]]"},
        },
    ),
    DemoJob(
        "canceled while running",
        {"operation": "analyze", "input": {"text": "A long analysis that the user stops. [[delay:8]]"}},
        cancel_when_running=True,
    ),
    # Each step's call takes a second on the local model server, so the progress can be watched.
    DemoJob(
        "200 KB in steps",
        {"operation": "summarize", "input": {"text": long_document(200 * 1024, delay_seconds=1)}},
    ),
)


def _say(line: str) -> None:
    print(line, flush=True)  # noqa: T201 - the demo's output is the point


def run(client: HttpApi) -> int:
    """Submit every demo job, follow them to a terminal state, print what happened."""
    ids: dict[str, DemoJob] = {}
    for job in JOBS:
        answer = client.submit(job.request, idempotency_key=str(uuid.uuid4()))
        ids[answer.body["jobId"]] = job
        _say(f"submitted  {job.title:<24} -> {answer.status} {answer.location}")
    _say("")
    seen: dict[str, str] = {}
    canceled: set[str] = set()
    deadline = time.monotonic() + POLL_TIMEOUT_SECONDS
    pause = 1
    while any(seen.get(job_id) not in TERMINAL for job_id in ids) and time.monotonic() < deadline:
        for job_id, job in ids.items():
            if seen.get(job_id) in TERMINAL:
                continue
            answer = client.get_job(job_id)
            document = answer.body
            pause = max(1, min(pause, answer.retry_after or pause))
            state = _state(document)
            if state != seen.get(job_id):
                seen[job_id] = state
                _say(f"{job.title:<24} {state:<34} attempts={document['attempts']}")
            if job.cancel_when_running and document["status"] == "Running" and job_id not in canceled:
                cancel = client.cancel(job_id)
                canceled.add(job_id)
                _say(f"{job.title:<24} cancel -> {cancel.status} {cancel.body['status']}")
        time.sleep(pause)  # the server's Retry-After (2 s by default)
    _say("")
    return _report(client, ids)


def _state(document: JsonObject) -> str:
    """The status, with a multi-step job's progress (`Running, steps 12/53`); plain when terminal."""
    progress = document.get("progress")
    if document["status"] in TERMINAL or not progress or progress["totalSteps"] <= 1:
        return str(document["status"])
    return f"{document['status']}, steps {progress['completedSteps']}/{progress['totalSteps']}"


def _report(client: HttpApi, ids: dict[str, DemoJob]) -> int:
    unfinished = 0
    for job_id, job in ids.items():
        document = client.get_job(job_id).body
        status = document["status"]
        if status not in TERMINAL:
            unfinished += 1
        line = f"{job.title:<24} {status:<10} attempts={document['attempts']}"
        progress = document.get("progress")
        if progress and progress["totalSteps"] > 1:
            line += f"  steps={progress['completedSteps']}/{progress['totalSteps']}"
        if document["error"]:
            line += f"  error={document['error']['code']}"
        if status == "Succeeded":
            output = client.get_result(job_id).body["output"]
            # An extract job's output is its JSON object: shown as the JSON it is.
            shown = output if isinstance(output, str) else json.dumps(output)
            line += f"  output={shown[:70]!r}"
        _say(line)
    return 1 if unfinished else 0


def _report_denials(stack: LocalStack) -> int:
    """Say how many calls the functions' roles denied (DESIGN.md, "Deploy fidelity"); 1 if any."""
    denials = stack.iam.denials.read()
    _say(f"\ncalls the functions' roles denied (IAM, must be 0): {len(denials)}")
    for denial in denials:
        _say(f"  {denial.line()}")
    return 1 if denials else 0


def main() -> int:
    """Start, run, stop; the exit code is 0 when every job reached a terminal state and no call was
    denied."""
    options = LocalOptions(port=8000, log=lambda line: print(line, file=sys.stderr, flush=True))  # noqa: T201
    stack = LocalStack(options)
    try:
        stack.start()
        state = stack.describe()
        _say(f"ready: {state['apiUrl']}\n")
        client = HttpApi(state["apiUrl"], issue_token(state, "demo-user", "demo-tenant"))
        unfinished = run(client)
        return _report_denials(stack) or unfinished
    finally:
        _say("\nstopping the local stack...")
        stack.stop()
        _say("stopped.")


if __name__ == "__main__":
    sys.exit(main())
