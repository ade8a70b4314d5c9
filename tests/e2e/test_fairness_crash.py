"""A running slot whose claim died, end to end (local stack, real HTTP, real JWTs, IAM enforced):
once the dead claim's lease has expired, the sweeper releases its slot by the claim's token, and
the tenant's next job runs.

A stack of this module's own, with local mode's fault hook set to the chaos shim (only tagged
jobs get a fault): a job tagged `[[chaos:worker_death_after_claim]]` kills its worker right after
its claim, which holds the tenant's only slot (cap 1), as a crash would. The job is then
canceled, so that nothing of the tenant's is left to claim: from then on the slot's item can go
only by a DeleteItem carrying the dead claim's token, which only the sweeper sends (a take-over
would put another token in it; an expiry alone leaves the item where it is). That DeleteItem
runs under the sweeper's role: a denied call fails this module when its stack stops.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from outlast.chaos.spec import ChaosSpec, ChaosState, ProcessFault, tag
from outlast.operator.targets import local_target
from shared.adapters.dynamodb_slots import slot_key
from shared.fairness import message_group
from shared.lifecycle import JobStatus
from tests.e2e.conftest import E2E_CONTEXT, stop_without_denials
from tests.support.fairness import operator, slots_of
from tests.support.local_stack import PROJECT_ROOT, RunningStack, start_stack

pytestmark = pytest.mark.e2e

# Longer than the session stack's 5 s (a local `--env`, as test_local_settings sets its backoff):
# the cancel must reach the dead claim while its lease still holds, on a loaded machine too.
LEASE_SECONDS = 20
# The lease's expiry, a sweep or two (every 2 s) and the cancel's own calls, with room to spare.
WAIT_SECONDS = 120


@pytest.fixture(scope="module")
def chaos_state(tmp_path_factory: pytest.TempPathFactory) -> ChaosState:
    return ChaosState(ChaosSpec(state_dir=Path(tmp_path_factory.mktemp("chaos")), tags=True))


@pytest.fixture(scope="module")
def crash_stack(request: pytest.FixtureRequest, chaos_state: ChaosState) -> Iterator[RunningStack]:
    # The session stack's template (one synth serves both); the fault hook and the lease are local
    running = start_stack(
        PROJECT_ROOT / "cdk.out.e2e",
        E2E_CONTEXT,
        [
            "--schedule-seconds",
            "2",
            "--env",
            f"LEASE_SECONDS={LEASE_SECONDS}",
            "--chaos",
            chaos_state.spec.to_json(),
        ],
    )
    yield running
    stop_without_denials(request, running, "the dead claim's stack")


def _wait_until(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_SECONDS
    while not (found := check()):
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.2)
    return found


def _summarize(text: str) -> dict[str, Any]:
    return {"operation": "summarize", "input": {"text": text}}


def test_the_sweeper_releases_a_dead_claims_slot_by_its_token_and_the_tenants_next_job_runs(
    crash_stack: RunningStack, chaos_state: ChaosState
) -> None:
    stack = crash_stack
    # Given a tenant capped at one running job
    tenant = f"crashcap-{uuid.uuid4().hex[:8]}"
    token = stack.token(f"bob-{tenant}", tenant)
    code, shown = operator(stack, "tenants", "set", "--tenant", tenant, "--max-running", "1")
    assert code == 0
    assert shown["tenant"]["maxRunning"] == 1

    # When its job's worker dies right after the claim
    text = f"Dies holding the slot, {tenant}. {tag(ProcessFault.WORKER_DEATH_AFTER_CLAIM)}"
    answer = stack.submit(token, _summarize(text))
    assert answer.status == 202, answer.body
    dead = answer.body["jobId"]
    _wait_until(
        lambda: any(
            event["kind"] == ProcessFault.WORKER_DEATH_AFTER_CLAIM and event["jobId"] == dead
            for event in chaos_state.events()
        ),
        "the worker died after its claim",
    )

    # Then the dead claim holds the tenant's only slot, with its lease's token
    job = local_target(stack.port).repository.get_job(dead)
    assert job is not None
    assert (job.status, job.slot) == (JobStatus.RUNNING, 0), job
    assert job.lease_token is not None
    held = {slot_key(message_group(tenant), 0): job.lease_token}
    assert slots_of(stack, tenant) == held

    # When the job is canceled (nobody holds it to act on that but the sweeper, at the lease's end)
    requested = stack.call("POST", f"/v1/jobs/{dead}/cancellation", token=token)
    assert requested.status == 202, requested.raw
    assert requested.body["status"] == "CancellationRequested"

    # Then the sweeper ends it and deletes the slot's item by the dead claim's token (no other
    # claim of the tenant exists to have taken it over, and an expired slot's item stays)
    canceled = stack.wait_terminal(dead, token, timeout_seconds=WAIT_SECONDS)
    assert (canceled["status"], canceled["attempts"]) == ("Canceled", 1), canceled
    _wait_until(lambda: slots_of(stack, tenant) == {}, "the dead claim's slot released")

    # And the tenant's next job takes the slot, runs, succeeds on its first attempt and frees it
    answer = stack.submit(token, _summarize(f"The next job of {tenant}. Revenue rose."))
    assert answer.status == 202, answer.body
    following = stack.wait_terminal(answer.body["jobId"], token, timeout_seconds=WAIT_SECONDS)
    assert (following["status"], following["attempts"]) == ("Succeeded", 1), following
    assert slots_of(stack, tenant) == {}
