"""Noisy neighbour: a quiet tenant's latency under another tenant's flood (DESIGN.md, "Fairness
between tenants").

The whole local stack over HTTP (as the pipeline section runs it), the local model answering each
call after 1 s (`[[delay:1]]`), queues delivered as SQS fair queues are documented to (local
mode's emulation, outlast.local.fair_queue). In one run:
1. B alone: tenant B (one user) submits `b_jobs` jobs at once; each job's submit -> terminal.
2. B under A's flood: tenant A (many users, so the per-owner submit rate never binds) submits
   `a_jobs` jobs as fast as a few clients can, then B submits `b_jobs` more; B's submit -> terminal
   again, and A's as the flood's own figure.
Submit -> terminal is the job's `createdAt` to its terminal write's `updatedAt` (both the server's
clock), read from one list call per tenant user. Reported: B's p50 and p95 in each phase and their
ratios (flooded / alone; the aim is under 2x).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from outlast.api.http import ConnectionLostError, HttpApi
from outlast.bench.pipeline import start_stack
from outlast.bench.stats import latency_summary, percentile
from outlast.local.access import issue_token
from outlast.local.iam.enforcement import denial_count

TERMINAL = frozenset({"Succeeded", "Failed", "Canceled"})
# Under the per-owner submit rate (60 a minute): each of A's users submits at most this many.
JOBS_PER_A_USER = 20
SUBMIT_CLIENTS = 12
SUBMIT_TRIES = 5
# Locally the submit path, not the worker, is the bottleneck (two cores serve both): at the
# stage's default concurrency the worker keeps up with any flood a local client can submit, and
# no backlog forms. The worker is run at its least (Lambda's event source minimum, 2 pollers of
# 10), so that A's flood queues up, as a flood against a stage's worker does in AWS.
STACK_CONTEXT = {"workerMaxConcurrency": "2"}
DRAIN_TIMEOUT_SECONDS = 900.0
RATIO_AIM = 2.0


def _text(tenant: str, n: int) -> str:
    return f"Report {n} of tenant {tenant}, {uuid.uuid4().hex}. [[delay:1]] Revenue rose in the quarter."


def _submit_all(apis: list[HttpApi], tenant: str, count: int) -> list[tuple[HttpApi, str]]:
    """`count` jobs spread over the users' clients, submitted concurrently; (client, job id) each."""

    def one(n: int) -> tuple[HttpApi, str]:
        api = apis[n % len(apis)]
        body = {"operation": "summarize", "input": {"text": _text(tenant, n)}}
        key = f"bench-noisy-{uuid.uuid4()}"
        for attempt in range(SUBMIT_TRIES):
            try:
                return api, api.submit(body, key).document.job_id
            except ConnectionLostError:
                # The local front drops a connection now and then under the flood: the same key
                # makes the retry safe (a replay, never a second job).
                if attempt == SUBMIT_TRIES - 1:
                    raise
                time.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    with ThreadPoolExecutor(SUBMIT_CLIENTS) as pool:
        return list(pool.map(one, range(count)))


def _wait_terminal(submitted: list[tuple[HttpApi, str]], timeout: float) -> dict[str, float]:
    """Submit -> terminal seconds of each job, by id, read from one list page per user until all end."""
    wanted = {job_id for _, job_id in submitted}
    apis = {id(api): api for api, _ in submitted}
    seconds: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(seconds) < len(wanted):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(wanted) - len(seconds)} jobs did not end in {timeout:.0f} s")
        for api in apis.values():
            cursor: str | None = None
            while True:
                page = api.list_jobs(None, 100, cursor).document
                for item in page.items:
                    if item.job_id in wanted and item.status in TERMINAL and item.job_id not in seconds:
                        seconds[item.job_id] = (item.updated_at - item.created_at).total_seconds()
                cursor = page.next_cursor
                if cursor is None:
                    break
        time.sleep(0.25)
    return seconds


def _summary(samples: list[float]) -> dict[str, Any]:
    summary = latency_summary(samples)
    if samples:
        summary["p95"] = round(percentile(samples, 0.95), 4)
    return summary


def _ratio(flooded: dict[str, Any], alone: dict[str, Any], key: str) -> float | None:
    if not flooded.get("n") or not alone.get("n") or not alone[key]:
        return None
    return round(float(flooded[key]) / float(alone[key]), 2)


def run(*, a_jobs: int, b_jobs: int, say: Callable[[str], None]) -> dict[str, Any]:
    """Measure B alone, then B under A's flood, on one fresh local stack."""
    stack = start_stack(say, STACK_CONTEXT)
    try:
        url = f"http://127.0.0.1:{stack.port}"
        run_id = uuid.uuid4().hex[:6]
        tenant_a, tenant_b = f"bench-a-{run_id}", f"bench-b-{run_id}"
        a_users = max(1, -(-a_jobs // JOBS_PER_A_USER))
        apis_a = [
            HttpApi(url, issue_token(stack.state, f"{tenant_a}-user-{n:03d}", tenant_a), 60)
            for n in range(a_users)
        ]
        api_b = HttpApi(url, issue_token(stack.state, f"{tenant_b}-user", tenant_b), 60)
        say(f"noisy neighbour: warm-up, then B alone ({b_jobs} jobs)")
        _wait_terminal(_submit_all([api_b], tenant_b, 2), DRAIN_TIMEOUT_SECONDS)  # cold starts
        alone = _wait_terminal(_submit_all([api_b], tenant_b, b_jobs), DRAIN_TIMEOUT_SECONDS)
        say(f"noisy neighbour: A floods ({a_jobs} jobs from {a_users} users), then B submits {b_jobs}")
        began = time.monotonic()
        flood = _submit_all(apis_a, tenant_a, a_jobs)
        flood_submit_seconds = round(time.monotonic() - began, 1)
        flooded_b = _submit_all([api_b], tenant_b, b_jobs)
        under_flood = _wait_terminal(flooded_b, DRAIN_TIMEOUT_SECONDS)
        a_pending_when_b_done = a_jobs - len(_ended(flood))
        a_seconds = _wait_terminal(flood, DRAIN_TIMEOUT_SECONDS)
        b_alone, b_flooded = _summary(list(alone.values())), _summary(list(under_flood.values()))
        result = {
            "aJobs": a_jobs,
            "aUsers": a_users,
            "bJobs": b_jobs,
            "modelCallSeconds": 1.0,
            "floodSubmitSeconds": flood_submit_seconds,
            "aNotEndedWhenBEnded": a_pending_when_b_done,
            "workerMaxConcurrency": int(STACK_CONTEXT["workerMaxConcurrency"]),
            "bAloneSeconds": b_alone,
            "bUnderFloodSeconds": b_flooded,
            "aUnderFloodSeconds": _summary(list(a_seconds.values())),
            "p50Ratio": _ratio(b_flooded, b_alone, "p50"),
            "p95Ratio": _ratio(b_flooded, b_alone, "p95"),
            "ratioAim": RATIO_AIM,
            "iamDenials": denial_count(stack.state),
        }
        say("noisy neighbour: " + json.dumps({k: result[k] for k in ("p50Ratio", "p95Ratio")}))
        return result
    finally:
        stack.stop()


def _ended(submitted: list[tuple[HttpApi, str]]) -> set[str]:
    """The jobs of `submitted` that have ended now (one pass over their users' lists)."""
    wanted = {job_id for _, job_id in submitted}
    ended: set[str] = set()
    for api in {id(api): api for api, _ in submitted}.values():
        cursor: str | None = None
        while True:
            page = api.list_jobs(None, 100, cursor).document
            ended.update(i.job_id for i in page.items if i.job_id in wanted and i.status in TERMINAL)
            cursor = page.next_cursor
            if cursor is None:
                break
    return ended


def markdown(section: dict[str, Any], stamp: str) -> str:
    """The section of docs/benchmarks.md."""

    def row(name: str, stats: dict[str, Any]) -> str:
        if not stats.get("n"):
            return f"| {name} | - | - | - | - |"
        return (
            f"| {name} | {stats['n']} | {stats['p50']:.2f} s | {stats['p95']:.2f} s | {stats['max']:.2f} s |"
        )

    def verdict(ratio: float | None) -> str:
        if ratio is None:
            return "-"
        side = "under" if ratio < section["ratioAim"] else "over"
        return f"{ratio:.2f}x ({side} the {section['ratioAim']:.0f}x aim)"

    return "\n".join(
        [
            "## Noisy neighbour: a quiet tenant under another tenant's flood\n",
            stamp + "\n",
            f"The local stack over HTTP, the local model answering each call after "
            f"{section['modelCallSeconds']:.0f} s, the queues delivered as SQS fair queues are documented "
            f"to (local mode's emulation: a tenant is each message's `MessageGroupId`). Tenant B (one "
            f"user) submits {section['bJobs']} jobs alone; then tenant A ({section['aUsers']} users, so "
            f"the per-owner rate never binds) submits {section['aJobs']} jobs "
            f"({section['floodSubmitSeconds']} s to submit them all) and B submits {section['bJobs']} "
            f"more. Submit -> terminal is the job's `createdAt` to its terminal `updatedAt`. When B's "
            f"last flooded job ended, {section['aNotEndedWhenBEnded']} of A's had not. The worker runs "
            f"at `workerMaxConcurrency` {section.get('workerMaxConcurrency', '-')} (its least: locally the "
            f"submit path is the bottleneck, and at more the worker keeps up with any flood a local "
            f"client can submit). No running cap is set (`maxRunningPerTenant` 0). IAM denials: "
            f"{section['iamDenials']}.\n",
            "| submit -> terminal | jobs | p50 | p95 | max |",
            "|---|---|---|---|---|",
            row("B alone", section["bAloneSeconds"]),
            row("B under A's flood", section["bUnderFloodSeconds"]),
            row("A (the flood)", section["aUnderFloodSeconds"]),
            "",
            f"**B's p50 under the flood is {verdict(section['p50Ratio'])} its p50 alone; its p95 "
            f"{verdict(section['p95Ratio'])}.**\n",
        ]
    )
