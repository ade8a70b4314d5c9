"""`outlast ops jobs redrive` against moto, through a CloudFormation stack's outputs.

Failed jobs whose message is gone (the worker or the sweeper finished it): named by id, or found
by a scan of the jobs table for an error code since an instant. The worker is not running: the
tests play its part and the sweeper's (tests.integration.test_operator_dlq.World).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from outlast.operator import job_redrive
from outlast.operator.commands import jobs as operator_jobs
from shared.adapters.sqs_queue import SqsJobQueue
from shared.clock import to_iso
from shared.job import JobError, JobRecord
from shared.lifecycle import JobStatus
from shared.ports import Lease, Transition
from tests.integration.test_operator_dlq import EXHAUSTED, POLICY, World, create_world
from tests.support import jobs

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

AUTH = JobError(code="provider_auth", message="The provider refused the credentials.")


@pytest.fixture
def world(moto_endpoint: str, resources: TestResources, capsys: pytest.CaptureFixture[str]) -> World:
    return create_world(moto_endpoint, resources, capsys)


def failed_at(world: World, error: JobError, at: datetime) -> JobRecord:
    """A job claimed at `at` and failed a second later (its last write, updatedAt)."""
    job = world.pending(created_at=at, dispatch_at=at)
    running = jobs.claim(world.repository, job.job_id, now=at)
    return world.repository.transition(
        Transition(
            job.job_id,
            JobStatus.RUNNING,
            JobStatus.FAILED,
            now=at + timedelta(seconds=1),
            lease_token=running.lease_token,
            error=error,
        )
    )


def sent(world: World, url: str) -> list[str]:
    """The job ids of the messages on a queue (left visible)."""
    return sorted(json.loads(body)["jobId"] for body in world.peek(url).values())


def snapshot(world: World, job_ids: list[str]) -> tuple[Any, ...]:
    queues = world.queues
    urls = (queues.jobs_url, queues.dlq_url, queues.isolation_url, queues.isolation_dlq_url)
    return tuple(world.depth(url) for url in urls), [world.item(job_id) for job_id in job_ids]


# --- by id -----------------------------------------------------------------------------------


def test_a_failed_job_named_by_id_is_redriven_to_the_jobs_queue(world: World) -> None:
    # Given a job the worker finished Failed/retries_exhausted (no message anywhere), whose input
    # was given the 24 h that follow a job's end
    failed = world.failed()
    world.payloads.set_input_expiry(failed.job_id, "item", jobs.now_millis() + timedelta(hours=24))

    # When on-call redrives it by id
    run = world.cli("jobs", "redrive", failed.job_id)

    # Then it is Pending again (redriveCount + 1, attempts renewed), its input lives as long as
    # the job, and one message carries it on the jobs queue
    assert run.code == 0, run.out
    job = world.job(failed.job_id)
    assert (job.status, job.attempts, job.stalls, job.redrive_count, job.error) == (
        JobStatus.PENDING,
        0,
        0,
        1,
        None,
    )
    assert world.input_ttl(failed.job_id) == int(failed.expires_at.timestamp())
    assert sent(world, world.queues.jobs_url) == [failed.job_id]
    assert world.depth(world.queues.isolation_url) == (0, 0)
    assert f"[done] job {failed.job_id}  redrive" in run.out
    assert "sent to the jobs queue" in run.out


def test_a_terminal_code_needs_force(world: World) -> None:
    auth = world.failed(AUTH)

    kept = world.cli("jobs", "redrive", auth.job_id)
    assert kept.code == 1
    assert "needs-force" in kept.out
    assert world.job(auth.job_id).status is JobStatus.FAILED
    assert world.depth(world.queues.jobs_url) == (0, 0)

    forced = world.cli("jobs", "redrive", auth.job_id, "--force")
    assert forced.code == 0, forced.out
    assert world.job(auth.job_id).status is JobStatus.PENDING
    assert sent(world, world.queues.jobs_url) == [auth.job_id]


def test_jobs_that_need_no_redrive_are_left_with_the_reason(world: World) -> None:
    # Given a live Running job, a Succeeded job and an id of no job
    live, done, ghost = world.running(), world.succeeded(), jobs.new_job().job_id
    before = snapshot(world, [live.job_id, done.job_id])

    run = world.cli("jobs", "redrive", live.job_id, done.job_id, ghost, "--force", "--json")

    # Then nothing changed, each is reported, and the exit code asks for attention
    assert run.code == 1
    steps = {step["jobId"]: step for step in run.document["steps"]}
    assert (steps[live.job_id]["action"], steps[live.job_id]["result"]) == ("skip", "kept")
    assert "already Succeeded" in steps[done.job_id]["why"]
    assert run.document["notFound"] == [ghost]
    assert f"no job {ghost}" in run.err
    assert snapshot(world, [live.job_id, done.job_id]) == before


def test_a_redrive_resets_crashes_and_isolation(world: World) -> None:
    # Given a job that crashed the worker it had to itself twice: Failed/worker_crashed, isolated
    crashed = world.crashed()
    assert (crashed.status, crashed.error and crashed.error.code) == (JobStatus.FAILED, "worker_crashed")
    assert (crashed.crashes, crashed.isolated, crashed.solo) == (2, True, True)

    # When redriven: worker_crashed needs --force (the cause must be fixed first)
    kept = world.cli("jobs", "redrive", crashed.job_id)
    assert kept.code == 1
    assert "needs-force" in kept.out
    forced = world.cli("jobs", "redrive", crashed.job_id, "--force")

    # Then crashes, isolation and solo are reset, and it goes to the jobs queue, not the isolation queue
    assert forced.code == 0, forced.out
    job = world.job(crashed.job_id)
    assert (job.status, job.crashes, job.isolated, job.solo, job.redrive_count) == (
        JobStatus.PENDING,
        0,
        False,
        False,
        1,
    )
    assert sent(world, world.queues.jobs_url) == [crashed.job_id]
    assert world.depth(world.queues.isolation_url) == (0, 0)


def test_an_isolated_job_is_redispatched_to_the_isolation_queue(world: World) -> None:
    # Given a Pending isolated job whose re-send was lost, and a Running job whose worker died
    # in a batch (its lease expired)
    isolated, dead = world.isolated(), world.running(lease_expired=True)
    assert (isolated.status, isolated.isolated) == (JobStatus.PENDING, True)

    run = world.cli("jobs", "redrive", isolated.job_id, dead.job_id, "--json")

    # Then both are sent to the isolation queue: the isolated one as it is, the dead worker's
    # job isolated by its recover (as the sweeper would), with its stall given back
    assert run.code == 0, run.err
    actions = {step["jobId"]: (step["action"], step["sentTo"]) for step in run.document["steps"]}
    assert actions == {isolated.job_id: ("redispatch", "isolation"), dead.job_id: ("recover", "isolation")}
    assert sent(world, world.queues.isolation_url) == sorted([isolated.job_id, dead.job_id])
    assert world.depth(world.queues.jobs_url) == (0, 0)
    recovered = world.job(dead.job_id)
    assert (recovered.status, recovered.isolated, recovered.stalls, recovered.lease_token) == (
        JobStatus.PENDING,
        True,
        0,
        None,
    )


# --- by error code and instant ------------------------------------------------------------------


def test_error_code_and_since_find_only_matching_failed_jobs_and_say_what_the_scan_read(world: World) -> None:
    # Given jobs Failed recently and long ago, with the code asked for and with others
    now = jobs.now_millis()
    recent = failed_at(world, EXHAUSTED, now - timedelta(minutes=30))
    old = failed_at(world, EXHAUSTED, now - timedelta(hours=3))
    other = failed_at(world, POLICY, now - timedelta(minutes=20))
    pending = world.pending()

    # When on-call redrives retries_exhausted jobs of the last two hours
    run = world.cli("jobs", "redrive", "--error-code", "retries_exhausted", "--since", "2h", "--json")

    # Then only the recent one was redriven; the others are exactly as they were
    assert run.code == 0, run.err
    assert [step["jobId"] for step in run.document["steps"]] == [recent.job_id]
    assert world.job(recent.job_id).status is JobStatus.PENDING
    for job in (old, other):
        assert world.job(job.job_id).status is JobStatus.FAILED
    assert world.job(pending.job_id).status is JobStatus.PENDING
    # ... and the run says how many items the scan read: all of the table (4 jobs, 4 inputs)
    scan = run.document["scan"]
    assert (scan["itemsRead"], scan["matched"], scan["errorCodes"]) == (8, 1, ["retries_exhausted"])
    assert "scan read 8 item(s)" in run.err


def test_since_takes_an_rfc_3339_instant_and_codes_add_up(world: World) -> None:
    now = jobs.now_millis()
    exhausted = failed_at(world, EXHAUSTED, now - timedelta(minutes=10))
    auth = failed_at(world, AUTH, now - timedelta(minutes=5))
    failed_at(world, AUTH, now - timedelta(hours=1))
    since = to_iso(now - timedelta(minutes=15))

    run = world.cli(
        "jobs",
        "redrive",
        "--error-code",
        "retries_exhausted",
        "--error-code",
        "provider_auth",
        "--since",
        since,
        "--dry-run",
        "--json",
    )

    # Then both codes are found since that instant, in the order they failed; provider_auth needs force
    actions = [(step["jobId"], step["action"]) for step in run.document["steps"]]
    assert actions == [(exhausted.job_id, "redrive"), (auth.job_id, "needs-force")]
    assert run.code == 1


def test_ids_and_a_scan_add_up_and_a_job_selected_twice_is_redriven_once(world: World) -> None:
    now = jobs.now_millis()
    both = failed_at(world, EXHAUSTED, now - timedelta(minutes=10))
    scanned = failed_at(world, EXHAUSTED, now - timedelta(minutes=5))
    named = world.failed(POLICY)

    run = world.cli(
        "jobs",
        "redrive",
        both.job_id,
        named.job_id,
        "--error-code",
        "retries_exhausted",
        "--since",
        "1h",
        "--force",
        "--json",
    )

    assert run.code == 0, run.err
    selected = {step["jobId"]: step["selectedBy"] for step in run.document["steps"]}
    assert selected == {both.job_id: ["id", "scan"], named.job_id: ["id"], scanned.job_id: ["scan"]}
    assert sent(world, world.queues.jobs_url) == sorted([both.job_id, scanned.job_id, named.job_id])
    assert world.job(both.job_id).redrive_count == 1


def test_the_scan_reads_page_by_page(world: World) -> None:
    # Given five matching jobs among other items, read two items per page
    now = jobs.now_millis()
    matching = [failed_at(world, EXHAUSTED, now - timedelta(minutes=minutes)) for minutes in range(5, 10)]

    run = world.cli(
        "jobs",
        "redrive",
        "--error-code",
        "retries_exhausted",
        "--since",
        "1h",
        "--scan-page-size",
        "2",
        "--dry-run",
        "--json",
    )

    # Then every page was read (10 items, 2 per page, and a last empty one at most) and each job found once
    scan = run.document["scan"]
    assert scan["pages"] >= 5
    assert (scan["itemsRead"], scan["matched"]) == (10, 5)
    oldest_first = sorted(matching, key=lambda job: job.updated_at)
    assert [step["jobId"] for step in run.document["steps"]] == [job.job_id for job in oldest_first]
    assert run.code == 0


def test_the_scan_passes_over_expired_jobs_not_yet_deleted(world: World) -> None:
    # Given a Failed job whose expiry has passed (TTL deletes late; expired jobs are gone)
    at = jobs.now_millis() - timedelta(minutes=5)
    job = world.pending(created_at=at, dispatch_at=at, expires_at=at + timedelta(minutes=1))
    running = jobs.claim(world.repository, job.job_id, now=at)
    world.repository.transition(
        Transition(
            job.job_id,
            JobStatus.RUNNING,
            JobStatus.FAILED,
            now=at,
            lease_token=running.lease_token,
            error=EXHAUSTED,
        )
    )

    run = world.cli("jobs", "redrive", "--error-code", "retries_exhausted", "--since", "1h", "--json")

    assert run.code == 0, run.err
    assert (run.document["scan"]["matched"], run.document["steps"]) == (0, [])
    assert world.job(job.job_id).status is JobStatus.FAILED


def test_a_scan_that_finds_nothing_has_nothing_to_do(world: World) -> None:
    world.failed(POLICY)
    run = world.cli("jobs", "redrive", "--error-code", "retries_exhausted", "--since", "1h")
    assert run.code == 0
    assert "0 job(s) selected" in run.out


# --- dry run and interruptions -------------------------------------------------------------------


def test_dry_run_prints_the_plan_changes_nothing_and_exits_as_the_run_would(world: World) -> None:
    # Given a redrivable job, one that needs --force, and an isolated stuck job
    exhausted, auth, isolated = world.failed(), world.failed(AUTH), world.isolated()
    ids = [exhausted.job_id, auth.job_id, isolated.job_id]
    before = snapshot(world, ids)

    # When dry-run
    run = world.cli("jobs", "redrive", *ids, "--dry-run", "--json")

    # Then it prints the plan and the lane each job would go to, changes nothing, and exits 1
    # because the run would leave the provider_auth job
    assert run.code == 1
    plan = {step["jobId"]: (step["action"], step["sendsTo"]) for step in run.document["steps"]}
    assert plan == {
        exhausted.job_id: ("redrive", "jobs"),
        auth.job_id: ("needs-force", None),
        isolated.job_id: ("redispatch", "isolation"),
    }
    assert run.document["dryRun"] is True
    assert snapshot(world, ids) == before
    # ... without the job that needs --force, the dry run exits 0, and so does the run
    assert world.cli("jobs", "redrive", exhausted.job_id, "--dry-run").code == 0
    assert world.cli("jobs", "redrive", exhausted.job_id).code == 0


def test_a_failed_send_after_the_write_reruns_without_loss(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a Failed job, and the send failing after its conditional write went through
    failed = world.failed()
    send = SqsJobQueue.send

    def throttled(*_: Any, **__: Any) -> None:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "SendMessage")

    monkeypatch.setattr(SqsJobQueue, "send", throttled)
    first = world.cli("jobs", "redrive", failed.job_id)

    # Then the job is Pending (redriven once) without a message, and the output says how to finish
    assert first.code == 1
    assert "not sent to the jobs queue" in first.out
    assert f"rerun `outlast ops jobs redrive {failed.job_id}`" in first.out
    # the stack's dispatchGraceSeconds (an output), never a flag the operator restates
    assert "the sweeper re-sends it after its grace (600 s)" in first.out
    assert world.job(failed.job_id).status is JobStatus.PENDING
    assert world.depth(world.queues.jobs_url) == (0, 0)

    # When on-call reruns by id
    monkeypatch.setattr(SqsJobQueue, "send", send)
    rerun = world.cli("jobs", "redrive", failed.job_id)

    # Then the rerun plans a redispatch: one message, the job redriven once
    assert rerun.code == 0, rerun.out
    assert "redispatch" in rerun.out
    assert sent(world, world.queues.jobs_url) == [failed.job_id]
    assert world.job(failed.job_id).redrive_count == 1


def test_an_interrupt_after_the_write_says_how_to_finish_and_a_rerun_does(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two Failed jobs, and Ctrl-C arriving just after the first one's write
    first_job, second_job = world.failed(), world.failed()
    send = SqsJobQueue.send

    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(SqsJobQueue, "send", interrupted)
    first = world.cli("jobs", "redrive", first_job.job_id, second_job.job_id)

    # Then the run stops: the first job Pending without a message, the second untouched
    assert first.code == 130
    assert f"job {first_job.job_id} was in progress" in first.out
    assert f"Rerun `outlast ops jobs redrive {first_job.job_id}`" in first.out
    assert "sweeper re-sends it after its grace" in first.out
    assert world.job(first_job.job_id).status is JobStatus.PENDING
    assert world.job(second_job.job_id).status is JobStatus.FAILED

    # When on-call reruns with the same ids
    monkeypatch.setattr(SqsJobQueue, "send", send)
    rerun = world.cli("jobs", "redrive", first_job.job_id, second_job.job_id, "--json")

    # Then nothing is lost: the first is redispatched, the second redriven, each sent once
    assert rerun.code == 0, rerun.err
    actions = {step["jobId"]: step["action"] for step in rerun.document["steps"]}
    assert actions == {first_job.job_id: "redispatch", second_job.job_id: "redrive"}
    assert sent(world, world.queues.jobs_url) == sorted([first_job.job_id, second_job.job_id])
    assert [world.job(j.job_id).redrive_count for j in (first_job, second_job)] == [1, 1]


def test_a_job_that_moves_on_after_the_plan_is_left_alone(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a stuck Running job, and its worker (slow, not dead) heartbeating after the plan read it
    slow = world.running(lease_expired=True)
    plan_jobs = job_redrive.plan_jobs

    def plan_then_heartbeat(*args: Any) -> Any:
        planned = plan_jobs(*args)
        lease = Lease(token=slow.lease_token or "", expires_at=jobs.now_millis() + jobs.LEASE)
        world.repository.heartbeat(slow.job_id, lease)
        return planned

    monkeypatch.setattr(operator_jobs, "plan_jobs", plan_then_heartbeat)
    run = world.cli("jobs", "redrive", slow.job_id)

    # Then the recover's write lost (the lease is live again): nothing written, nothing sent
    assert run.code == 1
    assert "[changed]" in run.out
    job = world.job(slow.job_id)
    assert (job.status, job.lease_token) == (JobStatus.RUNNING, slow.lease_token)
    assert world.depth(world.queues.isolation_url) == (0, 0)
    assert world.depth(world.queues.jobs_url) == (0, 0)


def test_usage_errors_exit_2(world: World) -> None:
    job_id = world.failed().job_id
    for argv, says in [
        ((), "say which jobs"),
        (("not-a-uuid",), "not a job id"),
        (("--error-code", "retries_exhausted"), "needs --since"),
        (("--since", "2h"), "needs --error-code"),
        (("--error-code", "retries_exhausted", "--since", "yesterday"), "neither an RFC 3339 instant"),
        (("--error-code", "retries_exhausted", "--since", "2026-03-01T02:00:00"), "no offset"),
    ]:
        run = world.cli("jobs", "redrive", *argv)
        assert (run.code, says in run.err) == (2, True), (argv, run.err)
    assert world.job(job_id).status is JobStatus.FAILED
