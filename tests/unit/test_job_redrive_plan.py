"""The redrive plan for jobs whose message is gone (`outlast ops jobs redrive`): a decision of the job alone.

The decision is the DLQ redrive's (outlast.operator.plan.decide_job); these tests pin it per
status and error code, the --force rules (worker_crashed included), how an expired lease is
settled (as the sweeper would, shared.leases), and the lane each dispatched job is sent to,
checked against `Lane.of` of the job as the in-memory repository writes it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from outlast.operator.job_redrive import Candidate, Found, ScanReport, candidates, plan_jobs
from outlast.operator.plan import (
    DISPATCHING,
    JOB_ERROR_CODES,
    REDRIVABLE_ERROR_CODES,
    Action,
    Decision,
    DispatchBump,
    PlanOptions,
    decide_job,
    write_for_job,
)
from shared.job import JobError, JobRecord
from shared.job_errors import ERROR_MESSAGES
from shared.lifecycle import JobStatus
from shared.ports import Lane, Transition
from tests.fakes import InMemoryJobRepository
from tests.support.jobs import new_job

NOW = datetime(2026, 3, 1, 3, 0, 0, tzinfo=UTC)
GRACE = timedelta(minutes=15)
DEFAULTS = PlanOptions()
FORCE = PlanOptions(force=True)
EXPIRED = NOW - timedelta(seconds=1)


def job(status: JobStatus = JobStatus.PENDING, **changes: Any) -> JobRecord:
    """A job created ten minutes before NOW, then moved to `status` with `changes`."""
    created = NOW - timedelta(minutes=10)
    return new_job(created_at=created, dispatch_at=created).model_copy(update={"status": status, **changes})


def failed(code: str, **changes: Any) -> JobRecord:
    error = JobError(code=code, message=ERROR_MESSAGES[code])
    return job(JobStatus.FAILED, attempts=3, stalls=3, error=error, **changes)


def running(lease_expires_at: datetime = EXPIRED, **changes: Any) -> JobRecord:
    fields: dict[str, Any] = {"attempts": 1, "stalls": 1, "lease_token": "a" * 32, **changes}
    return job(JobStatus.RUNNING, lease_expires_at=lease_expires_at, **fields)


def written(record: JobRecord, decision: Decision) -> JobRecord:
    """The job as the repository writes it for this decision (the fake keeps the adapter's rules)."""
    repository = InMemoryJobRepository()
    assert repository.create_job(record, NOW)
    write = write_for_job(record, decision, NOW, GRACE)
    if isinstance(write, DispatchBump):
        return repository.bump_dispatch(write.job, write.now, write.sweep_at)
    return repository.transition(write)


# --- Failed ----------------------------------------------------------------------------------


def test_a_job_out_of_retries_is_redriven_without_force_to_the_jobs_queue() -> None:
    decision = decide_job(failed("retries_exhausted"), NOW, DEFAULTS)
    assert (decision.action, decision.lane) == (Action.REDRIVE, Lane.SHARED)
    assert {"retries_exhausted"} == REDRIVABLE_ERROR_CODES


@pytest.mark.parametrize("code", sorted(JOB_ERROR_CODES - REDRIVABLE_ERROR_CODES))
def test_every_other_code_needs_force_and_force_redrives_it(code: str) -> None:
    # Given a job Failed for a reason a re-run does not fix by itself (worker_crashed included)
    failure = failed(code)

    # Then it is left without --force, saying why, and redriven with it
    kept = decide_job(failure, NOW, DEFAULTS)
    assert (kept.action, kept.lane) == (Action.NEEDS_FORCE, None)
    assert code in kept.why
    assert "--force" in kept.why
    forced = decide_job(failure, NOW, FORCE)
    assert (forced.action, forced.lane) == (Action.REDRIVE, Lane.SHARED)
    assert f"forced past {code}" in forced.why


def test_worker_crashed_needs_force_because_the_job_itself_crashed_its_workers() -> None:
    crashed = failed("worker_crashed", crashes=2, isolated=True, solo=True)
    kept = decide_job(crashed, NOW, DEFAULTS)
    assert kept.action is Action.NEEDS_FORCE
    assert "crashing every worker it ran on alone" in kept.why


def test_a_redrive_resets_crashes_and_isolation_so_the_job_goes_to_the_jobs_queue() -> None:
    # Given a job that ended worker_crashed after running alone from the isolation queue
    crashed = failed("worker_crashed", crashes=2, isolated=True, solo=True, redrive_count=1)

    # When forced
    decision = decide_job(crashed, NOW, FORCE)

    # Then the write is the operator redrive, and the job as written runs in shared batches again
    assert write_for_job(crashed, decision, NOW, GRACE) == Transition(
        job_id=crashed.job_id,
        source=JobStatus.FAILED,
        target=JobStatus.PENDING,
        now=NOW,
        operator_redrive=True,
        renew_attempts=True,
        dispatch_at=NOW,
        sweep_at=NOW + GRACE,
    )
    after = written(crashed, decision)
    assert (after.status, after.crashes, after.isolated, after.solo) == (JobStatus.PENDING, 0, False, False)
    assert (after.attempts, after.stalls, after.redrive_count, after.error) == (0, 0, 2, None)
    assert Lane.of(after) is decision.lane is Lane.SHARED
    assert "crashes 2 -> 0" in decision.why
    assert "isolation reset" in decision.why


def test_succeeded_and_canceled_jobs_are_skipped_even_with_force() -> None:
    for status in (JobStatus.SUCCEEDED, JobStatus.CANCELED):
        decision = decide_job(job(status), NOW, FORCE)
        assert (decision.action, decision.lane) == (Action.SKIP, None)
        assert f"already {status.value}" in decision.why


# --- Running ---------------------------------------------------------------------------------


def test_a_running_job_under_a_live_lease_is_left_to_its_worker() -> None:
    decision = decide_job(running(NOW + timedelta(seconds=30)), NOW, FORCE)
    assert decision.action is Action.SKIP
    assert "holds the lease" in decision.why


def test_a_job_whose_shared_invocation_died_is_recovered_isolated_with_its_stall_given_back() -> None:
    # Given a Running job whose lease ran out on a claim that shared its invocation
    stuck = running(solo=False, attempts=2, stalls=2)

    # When decided
    decision = decide_job(stuck, NOW, DEFAULTS)

    # Then it is recovered as the sweeper would: under the lease, still expired at the write,
    # isolated, its stall given back, no crash counted; and sent to the isolation queue
    assert (decision.action, decision.lane) == (Action.RECOVER, Lane.ISOLATION)
    write = write_for_job(stuck, decision, NOW, GRACE)
    assert isinstance(write, Transition)
    assert (write.lease_token, write.require_lease_expired) == ("a" * 32, True)
    assert (write.isolate, write.refund_stall, write.count_crash, write.renew_attempts) == (
        True,
        True,
        False,
        False,
    )
    after = written(stuck, decision)
    assert (after.status, after.isolated, after.stalls, after.crashes) == (JobStatus.PENDING, True, 1, 0)
    assert Lane.of(after) is Lane.ISOLATION


def test_a_job_that_crashed_its_worker_alone_counts_a_crash_and_stays_isolated() -> None:
    stuck = running(solo=True, isolated=True, crashes=0)
    decision = decide_job(stuck, NOW, DEFAULTS)
    assert (decision.action, decision.lane) == (Action.RECOVER, Lane.ISOLATION)
    after = written(stuck, decision)
    assert (after.crashes, after.isolated, after.stalls) == (1, True, 1)
    assert Lane.of(after) is Lane.ISOLATION


def test_the_max_crashes_th_solo_crash_needs_force_and_force_starts_the_job_over() -> None:
    # Given a job whose worker died under its second solo claim (maxCrashes 2)
    stuck = running(solo=True, isolated=True, crashes=1)

    # Then it is the sweeper's to fail (worker_crashed): recovering it needs --force
    kept = decide_job(stuck, NOW, DEFAULTS)
    assert kept.action is Action.NEEDS_FORCE
    assert "worker_crashed" in kept.why
    forced = decide_job(stuck, NOW, FORCE)
    assert (forced.action, forced.lane, forced.lease) == (Action.RECOVER, Lane.SHARED, None)
    after = written(stuck, forced)
    assert (after.crashes, after.isolated, after.redrive_count, after.attempts) == (0, False, 1, 0)
    assert Lane.of(after) is Lane.SHARED
    # ... and a stack with a higher maxCrashes just counts the crash
    tolerant = decide_job(stuck, NOW, PlanOptions(max_crashes=3))
    assert (tolerant.action, tolerant.lane) == (Action.RECOVER, Lane.ISOLATION)
    assert written(stuck, tolerant).crashes == 2


def test_a_job_out_of_retries_whose_worker_died_alone_is_recovered_and_started_over() -> None:
    stuck = running(solo=True, attempts=3, stalls=3)
    decision = decide_job(stuck, NOW, DEFAULTS)
    assert (decision.action, decision.lane, decision.lease) == (Action.RECOVER, Lane.SHARED, None)
    assert "out of retries" in decision.why
    after = written(stuck, decision)
    assert (after.status, after.attempts, after.stalls, after.redrive_count) == (JobStatus.PENDING, 0, 0, 1)


def test_a_job_whose_cancel_is_under_way_is_left_to_its_holder_or_the_sweeper() -> None:
    canceling = job(
        JobStatus.CANCELLATION_REQUESTED,
        attempts=1,
        cancel_requested_at=NOW - timedelta(seconds=5),
        lease_token="b" * 32,
        lease_expires_at=EXPIRED,
    )
    assert decide_job(canceling, NOW, FORCE).action is Action.SKIP


# --- Pending ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("isolated", "lane"), [(False, Lane.SHARED), (True, Lane.ISOLATION)])
def test_a_stuck_pending_job_is_redispatched_to_its_own_lane(isolated: bool, lane: Lane) -> None:
    # Given a Pending job, due, with retries left, and no message (an interrupted run left it so)
    stuck = job(JobStatus.PENDING, attempts=1, stalls=1, isolated=isolated)

    # Then it is dispatched again, to the queue of its lane: an isolated job never joins a batch
    decision = decide_job(stuck, NOW, DEFAULTS)
    assert (decision.action, decision.lane) == (Action.REDISPATCH, lane)
    assert write_for_job(stuck, decision, NOW, GRACE) == DispatchBump(
        job=stuck, now=NOW, sweep_at=NOW + GRACE
    )
    assert Lane.of(written(stuck, decision)) is lane


def test_the_retry_budget_is_stalls_not_attempts() -> None:
    # A job whose batch crashed got its stall back: more claims than stalls, retries left
    refunded = job(JobStatus.PENDING, attempts=3, stalls=2, isolated=True)
    assert decide_job(refunded, NOW, DEFAULTS).action is Action.REDISPATCH
    spent = job(JobStatus.PENDING, attempts=3, stalls=3)
    decision = decide_job(spent, NOW, DEFAULTS)
    assert decision.action is Action.SKIP
    assert "retries_exhausted" in decision.why


def test_a_pending_job_backing_off_is_left_to_its_own_message() -> None:
    backing_off = job(JobStatus.PENDING, attempts=1, stalls=1, dispatch_at=NOW + timedelta(seconds=20))
    decision = decide_job(backing_off, NOW, FORCE)
    assert decision.action is Action.SKIP
    assert "backing off" in decision.why


def test_only_dispatching_decisions_name_a_lane_and_make_a_write() -> None:
    records = [
        failed("retries_exhausted"),
        failed("provider_auth"),
        running(),
        running(NOW + timedelta(seconds=30)),
        job(JobStatus.PENDING),
        job(JobStatus.SUCCEEDED),
    ]
    for record in records:
        decision = decide_job(record, NOW, DEFAULTS)
        assert (decision.lane is not None) == (decision.action in DISPATCHING)
        if decision.action not in DISPATCHING:
            with pytest.raises(ValueError, match="no write"):
                write_for_job(record, decision, NOW, GRACE)


# --- the plan of a run ------------------------------------------------------------------------


def test_the_plan_skips_unreadable_records_and_reports_missing_and_expired_jobs() -> None:
    exhausted = failed("retries_exhausted")
    expired = failed("retries_exhausted", expires_at=NOW - timedelta(seconds=1))
    ghost = new_job()
    plan = plan_jobs(
        [
            Candidate(exhausted.job_id, exhausted, None, ("scan",)),
            Candidate(expired.job_id, expired, None, ("id",)),
            Candidate(ghost.job_id, None, None, ("id",)),
            Candidate("broken", None, "ValueError while reading it", ("scan",)),
        ],
        NOW,
        DEFAULTS,
    )
    assert [(s.job_id, s.action) for s in plan.steps] == [
        (exhausted.job_id, Action.REDRIVE),
        ("broken", Action.SKIP),
    ]
    assert "ValueError" in plan.steps[1].why
    assert plan.not_found == [expired.job_id, ghost.job_id]


def test_the_plan_warns_when_an_old_failures_input_may_be_gone() -> None:
    old = failed("retries_exhausted", updated_at=NOW - timedelta(hours=30))
    fresh = failed("retries_exhausted", updated_at=NOW - timedelta(hours=1))
    plan = plan_jobs([Candidate(old.job_id, old), Candidate(fresh.job_id, fresh)], NOW, DEFAULTS)
    assert any("input_missing" in w for w in plan.steps[0].warnings)
    assert plan.steps[1].warnings == ()


def test_jobs_named_by_id_and_found_by_the_scan_add_up_and_count_once() -> None:
    # Given two stored jobs, one named by id, both found by the scan, and an id of no job
    repository = InMemoryJobRepository()
    named, scanned = failed("provider_auth"), failed("provider_auth")
    for record in (named, scanned):
        assert repository.create_job(record, NOW)
    ghost = new_job().job_id
    found = Found(jobs=[named, scanned], unreadable={}, report=ScanReport(1, 10, 2, None))

    # When the candidates are gathered
    selected = candidates(repository, [named.job_id, ghost, named.job_id], found)

    # Then each job appears once, in order: ids first, then what only the scan found
    assert [(c.job_id, c.selected_by) for c in selected] == [
        (named.job_id, ("id", "scan")),
        (ghost, ("id",)),
        (scanned.job_id, ("scan",)),
    ]
    assert selected[1].job is None
