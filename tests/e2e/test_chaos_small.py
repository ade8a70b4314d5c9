"""A small seeded chaos run: every fault kind once, and the invariants that must survive them all.

The run starts its own local stack with the fault-injection shim on (`outlast local up --chaos`),
as `make chaos` does, and asserts what must hold whatever the timing: nothing lost, nothing
duplicated, nothing leaked to another owner, every fault really injected. Timings and call
costs are the table's business, never a test's.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from outlast.chaos.driver import DriverOptions
from outlast.chaos.plan import Fault, make_plan
from outlast.chaos.report import ChaosReport, render
from outlast.chaos.runner import run_chaos
from outlast.chaos.spec import ChaosSpec, ProcessFault, tag, tagged_fault
from outlast.local.lambda_runtime import FunctionPool, FunctionSpec, host_environment
from tests.support.local_stack import PROJECT_ROOT

# Each of the 18 fault kinds once, and 10 jobs no fault of their own touches. A worker that dies
# takes the jobs of its batch with it (collateral: not exact for the budget check); with 6 such
# jobs, a run whose killed workers' batches held all six once left none to compare exactly.
JOBS = 28
SEED = 7
# A whole run (stack start, 28 jobs, recoveries, checks) on a busy two-core machine.
RUN_TIMEOUT_SECONDS = 900


@pytest.fixture(scope="module")
def report() -> ChaosReport:
    options = DriverOptions(
        jobs=JOBS,
        seed=SEED,
        cdk_out=PROJECT_ROOT / "cdk.out.e2e",  # the session stack's context: one synth serves both
        drain_timeout=240,
    )
    return run_chaos(options)


def _explain(report: ChaosReport) -> str:
    return "\n" + render(report)


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS)
def test_every_accepted_job_ends_and_none_is_lost(report: ChaosReport) -> None:
    # Given a seeded run with every fault kind, When it drains, Then every job is accepted and ends
    assert report.accepted == JOBS, _explain(report)
    assert report.terminal == JOBS, _explain(report)
    assert report.lost == [], _explain(report)


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS)
def test_no_key_makes_a_second_job(report: ChaosReport) -> None:
    # Retries after process deaths, duplicate deliveries and ten concurrent identical submits
    assert report.duplicates == [], _explain(report)


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS)
def test_another_owner_never_sees_a_job(report: ChaosReport) -> None:
    # The second owner's status, result and cancel probes all got 404, and its list stayed empty
    assert report.probes > 0
    assert report.leaks == [], _explain(report)


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS)
def test_no_invariant_breaks(report: ChaosReport) -> None:
    # Results exist exactly for Succeeded jobs, cancels agree with the end state, no job makes
    # more model calls than claims, poison is parked with its reason
    assert report.violations == [], _explain(report)
    assert report.ok, _explain(report)


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS)
def test_no_job_fails_for_another_jobs_crash(report: ChaosReport) -> None:
    # Crash isolation: a job that shared a batch with a dying worker ran again alone, at no cost
    # to its attempts, so nothing it did not cause itself failed it (whether a death shares a
    # batch is up to timing; the row is zero either way)
    assert report.blameless_failures == [], _explain(report)


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS)
def test_no_function_makes_a_call_its_role_does_not_allow(report: ChaosReport) -> None:
    # Local mode enforces every role: the recovery paths faults force (redrives, the sweeper's
    # terminal writes, adoptions) must work under the deployed grants too
    assert report.iam_denials == [], _explain(report)


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS)
def test_every_process_fault_really_fired(report: ChaosReport) -> None:
    # A chaos run proves nothing about a fault that never happened
    fired = {kind for kind, jobs in report.faults_fired.items() if jobs > 0}
    assert fired == {fault.value for fault in ProcessFault}, _explain(report)
    injected = {row.kind: row.injected for row in report.rows}
    missed = [kind for kind, count in injected.items() if count is not None and count < 1]
    assert missed == [], _explain(report)


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS)
def test_a_batch_its_batcher_died_before_recording_is_found_and_cancelled(report: ChaosReport) -> None:
    # The batcher died right after its provider batch was created (batcher_death_after_create): its
    # intent led the poller to that batch, which was cancelled (the local list runs nothing, so it
    # was still running); after the drain no batch is left running at the model server and the
    # open batches' table holds no batch and no intent
    assert report.faults_fired.get(ProcessFault.BATCHER_DEATH_AFTER_CREATE.value, 0) > 0
    assert report.batch_leftovers == [], _explain(report)
    assert report.provider_batches_cancelled >= 1, _explain(report)


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS)
def test_poison_is_parked_with_its_reason(report: ChaosReport) -> None:
    assert report.poison_sent >= 2
    assert sum(report.poison_parked.values()) == report.poison_sent, _explain(report)
    assert set(report.poison_parked) == {"unparseable", "unknown_job"}, _explain(report)


def test_the_plan_is_reproducible_and_covers_every_fault() -> None:
    # Given a seed, When the plan is made twice, Then it is the same, with every kind at least once
    first, second = make_plan(JOBS, SEED, "same"), make_plan(JOBS, SEED, "same")
    assert first == second
    kinds = Counter(job.fault for job in first.jobs)
    assert set(kinds) == set(Fault)
    assert len({job.text for job in first.jobs}) == JOBS
    assert len({job.key for job in first.jobs}) == JOBS
    assert make_plan(JOBS, SEED + 1, "same").jobs != first.jobs


def test_the_report_fails_on_any_loss_duplicate_leak_violation_denial_or_blameless_failure() -> None:
    clean = ChaosReport(run_id="r", seed=1, planned=1, owners=1)
    assert clean.ok
    assert render(clean).endswith("PASS")
    for name in (
        "lost",
        "duplicates",
        "leaks",
        "violations",
        "blameless_failures",
        "iam_denials",
        "batch_leftovers",
    ):
        failing = ChaosReport(run_id="r", seed=1, planned=1, owners=1)
        setattr(failing, name, ["job: why"])
        assert not failing.ok, name
        assert render(failing).endswith("FAIL"), name
        assert failing.to_dict()["ok"] is False


def test_a_chaos_spec_names_only_known_faults(tmp_path: Path) -> None:
    spec = ChaosSpec.load('{"seed": 3, "rates": {"relay_failure": 0.5}}', tmp_path)
    assert spec.rates == {ProcessFault.RELAY_FAILURE: 0.5}
    assert ChaosSpec.load(spec.to_json()) == spec
    with pytest.raises(ValueError, match="unknown"):
        ChaosSpec.load('{"seeds": 3}', tmp_path)
    with pytest.raises(ValueError, match="not_a_fault"):
        ChaosSpec.load('{"rates": {"not_a_fault": 0.5}}', tmp_path)
    assert tagged_fault(f"text {tag(ProcessFault.RELAY_OUTAGE)}") is ProcessFault.RELAY_OUTAGE
    assert tagged_fault("[[chaos:unknown_kind]]") is None


SLOW_INIT_HANDLER = """
import time

time.sleep(2.5)  # a cold start on a loaded machine: imports taking longer than usual


def handler(event, context):
    return {"remainingMs": context.get_remaining_time_in_millis()}
"""


def test_a_cold_start_is_not_charged_to_the_function_timeout(tmp_path: Path) -> None:
    # Found by the chaos run on a loaded machine: with init charged to the timeout, replaced
    # submit environments timed out in a loop (each timeout killed the process, so the next
    # invocation was cold again). Lambda gives init its own budget.
    # Given a function whose init takes longer than its 2 s timeout (its handler itself is instant)
    (tmp_path / "slow.py").write_text(SLOW_INIT_HANDLER)
    spec = FunctionSpec(
        logical_id="Slow",
        name="slow",
        handler="slow.handler",
        code_dir=tmp_path,
        environment={},
        timeout_seconds=2,
        memory_mb=128,
        concurrency=1,
    )
    pool = FunctionPool(spec, host_environment(), lambda _line: None)
    try:
        # When it is invoked cold, Then it answers, as in Lambda, with its whole timeout left to run
        answer = pool.invoke({})
    finally:
        pool.stop()
    assert answer["remainingMs"] > 1000


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS)
def test_the_budget_ledger_charges_no_job_more_than_the_model_server_served(report: ChaosReport) -> None:
    # Every job reserved and settled under the stack's budget: per job, what the ledger charged is
    # at most what the model server's own tally says it served, and exactly that where no fault
    # touched the job; nothing stays reserved
    assert report.budget_mismatches == [], _explain(report)
    assert report.budget_exact_jobs > 0
    assert 0 < report.budget_charged <= report.budget_served
