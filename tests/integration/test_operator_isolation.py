"""The isolation queue's DLQ in the operator commands, against moto: `dlq list --queue isolation`,
`dlq redrive --queue isolation`, and `jobs inspect` looking on both DLQs.

Jobs reach the isolation queue after a worker invocation they shared died (crash isolation,
DESIGN.md "Lifecycle"); the tests play the worker and the sweeper (World.claimed, World.swept).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from shared.lifecycle import JobStatus
from tests.integration.test_operator_dlq import World, create_world

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration


@pytest.fixture
def world(moto_endpoint: str, resources: TestResources, capsys: pytest.CaptureFixture[str]) -> World:
    return create_world(moto_endpoint, resources, capsys)


def sent(world: World, url: str) -> list[str]:
    return sorted(json.loads(body)["jobId"] for body in world.peek(url).values())


def test_list_reads_the_isolation_dlq_only_when_asked(world: World) -> None:
    # Given a message on each DLQ
    isolated, failed = world.isolated(), world.failed()
    on_isolation = world.to_dlq(isolated, dlq_url=world.queues.isolation_dlq_url)
    on_jobs = world.to_dlq(failed)

    # When on-call lists each
    isolation = world.cli("dlq", "list", "--queue", "isolation", "--json")
    default = world.cli("dlq", "list", "--json")

    # Then each shows its own DLQ's messages, and what a redrive would do and where it would send
    assert isolation.code == default.code == 0
    assert isolation.document["queue"] == "isolation"
    [row] = isolation.document["messages"]
    assert (row["messageId"], row["jobId"], row["action"], row["sendsTo"]) == (
        on_isolation,
        isolated.job_id,
        "redispatch",
        "isolation",
    )
    assert [m["messageId"] for m in default.document["messages"]] == [on_jobs]
    assert default.document["queue"] == "jobs"
    table = world.cli("dlq", "list", "--queue", "isolation")
    assert table.out.startswith("isolation DLQ of the stack ")


def test_redrive_of_the_isolation_dlq_sends_each_job_to_its_lane_as_written(world: World) -> None:
    # Given on the isolation DLQ: a stuck isolated Pending job's message and a worker_crashed job's
    isolated, crashed = world.isolated(), world.crashed()
    for job in (isolated, crashed):
        world.to_dlq(job, dlq_url=world.queues.isolation_dlq_url)
    jobs_dlq_message = world.to_dlq(world.failed())

    # When on-call redrives the isolation DLQ, forcing past worker_crashed
    dry = world.cli("dlq", "redrive", "--queue", "isolation", "--all", "--force", "--dry-run", "--json")
    run = world.cli("dlq", "redrive", "--queue", "isolation", "--all", "--force")

    # Then the isolated job is redispatched to the isolation queue; the redriven one, whose
    # crashes and isolation the redrive reset, to the jobs queue; the isolation DLQ is empty and
    # the jobs DLQ untouched
    assert {s["jobId"]: (s["action"], s["sendsTo"]) for s in dry.document["steps"]} == {
        isolated.job_id: ("redispatch", "isolation"),
        crashed.job_id: ("redrive", "jobs"),
    }
    assert run.code == 0, run.out
    assert "of the isolation DLQ" in run.out
    assert sent(world, world.queues.isolation_url) == [isolated.job_id]
    assert sent(world, world.queues.jobs_url) == [crashed.job_id]
    redriven = world.job(crashed.job_id)
    assert (redriven.status, redriven.crashes, redriven.isolated, redriven.redrive_count) == (
        JobStatus.PENDING,
        0,
        False,
        1,
    )
    assert world.depth(world.queues.isolation_dlq_url) == (0, 0)
    assert set(world.peek(world.queues.dlq_url)) == {jobs_dlq_message}


def test_a_jobs_dlq_redrive_sends_an_isolated_job_to_the_isolation_queue(world: World) -> None:
    # Given a stale shared-queue copy of an isolated job that ended on the jobs DLQ
    isolated = world.isolated()
    world.to_dlq(isolated)

    run = world.cli("dlq", "redrive", "--job-id", isolated.job_id)

    # Then the job goes where it runs now: the isolation queue, never back into a batch
    assert run.code == 0, run.out
    assert sent(world, world.queues.isolation_url) == [isolated.job_id]
    assert world.depth(world.queues.jobs_url) == (0, 0)
    assert world.depth(world.queues.dlq_url) == (0, 0)


def test_worker_crashed_needs_force_on_the_dlq_too(world: World) -> None:
    crashed = world.crashed()
    world.to_dlq(crashed, dlq_url=world.queues.isolation_dlq_url)
    run = world.cli("dlq", "redrive", "--queue", "isolation", "--error-code", "worker_crashed")
    assert run.code == 1
    assert "needs-force" in run.out
    assert world.job(crashed.job_id).status is JobStatus.FAILED
    assert world.depth(world.queues.isolation_dlq_url) == (1, 0)


def test_inspect_shows_crashes_isolation_and_the_messages_on_both_dlqs(world: World) -> None:
    # Given an isolated job with a message on each DLQ
    isolated = world.isolated()
    on_jobs = world.to_dlq(isolated)
    on_isolation = world.to_dlq(isolated, dlq_url=world.queues.isolation_dlq_url)
    world.to_dlq(world.failed(), dlq_url=world.queues.isolation_dlq_url)

    document = world.cli("jobs", "inspect", isolated.job_id, "--json").document
    text = world.cli("jobs", "inspect", isolated.job_id).out

    # Then the record's crash isolation is shown, and both DLQs were searched
    assert (document["isolated"], document["solo"], document["crashes"], document["stalls"]) == (
        True,
        False,
        0,
        0,
    )
    assert (document["attempts"], document["maxAttempts"]) == (1, 3)
    messages = document["messages"]
    assert [m["messageId"] for m in messages["dlq"]] == [on_jobs]
    assert [m["messageId"] for m in messages["isolationDlq"]] == [on_isolation]
    assert messages["isolationDlqDepth"] == {"visible": 2, "inFlight": 0, "delayed": 0}
    assert messages["isolationQueueDepth"] == {"visible": 0, "inFlight": 0, "delayed": 0}
    fields = {
        line.split()[0]: line for line in text.splitlines()[1:] if line.startswith("  ") and line.split()
    }
    assert "stalls" in fields
    assert "isolated: runs alone, from the isolation queue" in fields["crashes"]
    [isolation_dlq] = [line for line in text.splitlines() if line.startswith("  isolation DLQ ")]
    assert "1 of them for this job" in isolation_dlq
    assert any(line.startswith("  isolation queue ") for line in text.splitlines())
    # ... and a job that crashed alone says so
    crashed = world.cli("jobs", "inspect", world.crashed().job_id, "--json", "--no-dlq").document
    assert (crashed["crashes"], crashed["solo"], crashed["isolated"]) == (2, True, True)
    assert crashed["messages"]["isolationDlq"] is None
