"""A running cap end to end on the local stack (IAM enforced): an operator caps a tenant at one job
running at once with `outlast ops tenants set --local`; its user submits four slow jobs at once;
at no moment does the tenant have two running, every job still succeeds on its first attempt
(a claim with no free slot deferred the job, costing none), and its slots are all free at the end.
A tenant of this run's own, so nothing else on the shared stack is capped."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support.fairness import operator, slots_of
from tests.support.local_stack import RunningStack

pytestmark = pytest.mark.e2e

JOBS = 4
TIMEOUT_SECONDS = 120


def test_a_tenant_capped_at_one_never_runs_two_and_every_deferred_job_succeeds_first_time(
    stack: RunningStack,
) -> None:
    # Given a tenant capped at one running job
    tenant = f"capped-{uuid.uuid4().hex[:8]}"
    token = stack.token(f"alice-{tenant}", tenant)
    code, shown = operator(stack, "tenants", "set", "--tenant", tenant, "--max-running", "1")
    assert code == 0
    assert shown["tenant"]["maxRunning"] == 1

    # When its user submits four slow jobs at once
    ids = []
    for n in range(JOBS):
        text = f"Capped report {n} of {tenant}. [[delay:2]] Revenue rose."
        answer = stack.submit(token, {"operation": "summarize", "input": {"text": text}})
        assert answer.status == 202, answer.body
        ids.append(answer.body["jobId"])

    # Then while they run, the tenant never has more than one Running (one read of its list each time)
    most_running, deadline = 0, time.monotonic() + TIMEOUT_SECONDS
    while True:
        page = stack.call("GET", "/v1/jobs?limit=100", token=token).body["items"]
        statuses = {item["jobId"]: item["status"] for item in page}
        most_running = max(most_running, sum(1 for s in statuses.values() if s == "Running"))
        assert most_running <= 1, statuses
        if all(statuses.get(job_id) in {"Succeeded", "Failed", "Canceled"} for job_id in ids):
            break
        assert time.monotonic() < deadline, statuses
        time.sleep(0.2)

    # And every job succeeded on its first attempt: the deferrals charged none
    documents = [stack.call("GET", f"/v1/jobs/{job_id}", token=token).body for job_id in ids]
    assert [d["status"] for d in documents] == ["Succeeded"] * JOBS
    assert [d["attempts"] for d in documents] == [1] * JOBS
    assert most_running == 1
    # And no slot is left held: each claim released its own
    assert slots_of(stack, tenant) == {}
