"""`outlast ops dlq list` and `outlast ops dlq redrive` against moto, through a stack's outputs.

The stack is a stand-in created in moto whose outputs name this test's table, queues and bucket,
so every command here runs the AWS path (`--stack-name`, DescribeStacks, the operator's
credentials) exactly as on-call would. The worker is not running: the tests play its part.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError

from outlast.operator import dlq as operator_dlq
from outlast.operator.commands import dlq as dlq_command
from shared import resources as r
from shared.adapters.dynamo_items import INPUT_SORT_VALUE, job_key, job_pk
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.payloads import DynamoS3PayloadStore
from shared.adapters.sqs_queue import SqsJobQueue, encode_message
from shared.job import JobError, JobInput, JobRecord
from shared.job_errors import job_error
from shared.leases import expired_lease_outcome
from shared.lifecycle import JobStatus
from shared.ports import JobMessage, Lease, Transition
from tests.support import jobs
from tests.support.aws import REGION
from tests.support.cli import run as run_cli
from tests.support.pipeline import Queues, create_queues

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

MAX_CRASHES = 2  # the stack's default, which the operator commands assume too
EXHAUSTED = JobError(code="retries_exhausted", message="The provider kept failing.")
POLICY = JobError(code="content_policy", message="The provider declined the input.")


@dataclass
class Run:
    """One CLI run: its exit code and what it printed."""

    code: int
    out: str
    err: str

    @property
    def document(self) -> Any:
        return json.loads(self.out)


@dataclass
class World:
    """A deployed-looking outlast in moto: resources, queues, and a stack whose outputs name them."""

    resources: TestResources
    queues: Queues
    stack_name: str
    sqs: Any
    dynamodb: Any
    repository: DynamoJobRepository
    payloads: DynamoS3PayloadStore
    cli: Callable[..., Run]

    # --- jobs in every state, written as the functions write them -------------------------

    def pending(self, **changes: Any) -> JobRecord:
        job = jobs.create(self.repository, jobs.new_job(**changes))
        self.payloads.put_input(JobInput(job_id=job.job_id, text="secret input text"), "item", job.expires_at)
        return job

    def running(self, *, lease_expired: bool = False) -> JobRecord:
        # Claimed long enough ago (when asked) that its lease ran out: its worker died.
        at = jobs.now_millis() - (jobs.LEASE + timedelta(seconds=5) if lease_expired else timedelta())
        job = self.pending(created_at=at, dispatch_at=at)
        return jobs.claim(self.repository, job.job_id, now=at)

    def failed(self, error: JobError = EXHAUSTED) -> JobRecord:
        return jobs.fail(self.repository, self.running(), error)

    def claimed(self, job: JobRecord, *, at: datetime, solo: bool) -> JobRecord:
        """The worker's claim at `at`: alone in its invocation (solo), or in a batch."""
        return self.repository.transition(
            Transition(
                job.job_id,
                JobStatus.PENDING,
                JobStatus.RUNNING,
                now=at,
                new_lease=Lease(token=secrets.token_hex(16), expires_at=at + jobs.LEASE),
                count_attempt=True,
                solo=solo,
                require_due=True,
                sweep_at=at + jobs.LEASE,
            )
        )

    def swept(self, running: JobRecord, *, at: datetime) -> JobRecord:
        """The sweeper once the lease ran out: shared.leases' outcome, written as the sweeper writes it."""
        outcome = expired_lease_outcome(running, MAX_CRASHES)
        return self.repository.transition(
            Transition(
                running.job_id,
                running.status,
                outcome.target,
                now=at,
                lease_token=running.lease_token,
                require_lease_expired=True,
                isolate=outcome.isolate,
                count_crash=outcome.count_crash,
                refund_stall=outcome.refund_stall,
                error=job_error(outcome.error_code) if outcome.error_code else None,
                dispatch_at=at if outcome.dispatches else None,
                sweep_at=at + jobs.DISPATCH_GRACE if outcome.dispatches else None,
            )
        )

    def isolated(self) -> JobRecord:
        """Pending, isolated and due: its batch's worker died, and the sweeper's re-send was lost."""
        start = jobs.now_millis() - 3 * jobs.LEASE
        job = self.pending(created_at=start, dispatch_at=start)
        return self.swept(
            self.claimed(job, at=start, solo=False), at=start + jobs.LEASE + timedelta(seconds=1)
        )

    def crashed(self) -> JobRecord:
        """Failed/worker_crashed: it took down the worker it had to itself, twice (maxCrashes 2)."""
        start = jobs.now_millis() - 5 * jobs.LEASE
        job = self.pending(created_at=start, dispatch_at=start)
        first = self.swept(
            self.claimed(job, at=start, solo=True), at=start + jobs.LEASE + timedelta(seconds=1)
        )
        again = start + 2 * jobs.LEASE
        return self.swept(
            self.claimed(first, at=again, solo=True), at=again + jobs.LEASE + timedelta(seconds=1)
        )

    def succeeded(self) -> JobRecord:
        return jobs.succeed(self.repository, self.payloads, self.running(), output="secret output text")

    def canceled(self) -> JobRecord:
        job = self.pending()
        return self.repository.transition(
            Transition(job.job_id, JobStatus.PENDING, JobStatus.CANCELED, now=jobs.now_millis())
        )

    # --- queues ------------------------------------------------------------------------------

    def to_dlq(
        self,
        job: JobRecord | None = None,
        *,
        body: str | None = None,
        reason: str | None = None,
        dlq_url: str | None = None,
    ) -> str:
        """Put a message on the DLQ (the jobs queue's unless another is named) as the redrive
        policy (no reason) or the worker (a reason) would."""
        text = body if body is not None else encode_message(JobMessage(job.job_id if job else "", "trace-1"))
        attributes: dict[str, Any] = {}
        if reason is not None:
            attributes["reason"] = {"DataType": "String", "StringValue": reason}
        response = self.sqs.send_message(
            QueueUrl=dlq_url or self.queues.dlq_url, MessageBody=text, MessageAttributes=attributes
        )
        return str(response["MessageId"])

    def depth(self, url: str) -> tuple[int, int]:
        depth = operator_dlq.queue_depth(self.sqs, url)
        return depth.visible, depth.in_flight

    def peek(self, url: str) -> dict[str, str]:
        """Message id -> body of every message, left visible again."""
        seen: dict[str, str] = {}
        handles = []
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30, WaitTimeSeconds=0
            ).get("Messages", [])
            if not messages:
                break
            for message in messages:
                seen[message["MessageId"]] = message["Body"]
                handles.append(message["ReceiptHandle"])
        for handle in handles:
            self.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
        return seen

    def item(self, job_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.dynamodb.get_item(
            TableName=self.resources.jobs_table, Key=job_key(job_id), ConsistentRead=True
        )["Item"]
        return found

    def job(self, job_id: str) -> JobRecord:
        found = self.repository.get_job(job_id)
        assert found is not None
        return found

    def input_ttl(self, job_id: str) -> int:
        """When TTL deletes the job's input item (epoch seconds)."""
        found = self.dynamodb.get_item(
            TableName=self.resources.jobs_table,
            Key={r.PARTITION_KEY: {"S": job_pk(job_id)}, r.SORT_KEY: {"S": INPUT_SORT_VALUE}},
            ConsistentRead=True,
        )["Item"]
        return int(found[r.TTL_ATTRIBUTE]["N"])


def build_cli(capsys: pytest.CaptureFixture[str], target: list[str]) -> Callable[..., Run]:
    """`outlast ops ARGV... TARGET...` through click's runner (capsys: kept for the callers' shape)."""
    assert capsys is not None

    def run(*argv: str) -> Run:
        code, out, err = run_cli("ops", *argv, *target)
        return Run(code, out, err)

    return run


def create_world(
    moto_endpoint: str,
    resources: TestResources,
    capsys: pytest.CaptureFixture[str],
    more_outputs: dict[str, str] | None = None,
) -> World:
    """`more_outputs`: stack outputs beyond the ones every outlast has had (the budgets table)."""
    suffix = secrets.token_hex(4)
    queues = create_queues(moto_endpoint, suffix, max_attempts=3, visibility_seconds=30)
    cloudformation = boto3.client("cloudformation", endpoint_url=moto_endpoint, region_name=REGION)
    outputs = {
        "JobsTableName": resources.jobs_table,
        "JobsQueueUrl": queues.jobs_url,
        "DlqUrl": queues.dlq_url,
        "IsolationQueueUrl": queues.isolation_url,
        "IsolationDlqUrl": queues.isolation_dlq_url,
        "PayloadBucketName": resources.bucket,
        # The stage's settings the redrive commands act by: read from the stack, never from flags.
        "DispatchGraceSeconds": "600",
        "MaxCrashes": "2",
        **(more_outputs or {}),
    }
    stack_name = f"outlast-{suffix}"
    cloudformation.create_stack(
        StackName=stack_name,
        TemplateBody=json.dumps(
            {
                "Resources": {
                    "Marker": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": f"m-{suffix}"}}
                },
                "Outputs": {key: {"Value": value} for key, value in outputs.items()},
            }
        ),
    )
    dynamodb = boto3.client("dynamodb", endpoint_url=moto_endpoint, region_name=REGION)
    return World(
        resources=resources,
        queues=queues,
        stack_name=stack_name,
        sqs=boto3.client("sqs", endpoint_url=moto_endpoint, region_name=REGION),
        dynamodb=dynamodb,
        repository=DynamoJobRepository(dynamodb, resources.jobs_table, resources.idempotency_table),
        payloads=DynamoS3PayloadStore(
            dynamodb,
            lambda: boto3.client("s3", endpoint_url=moto_endpoint, region_name=REGION),
            resources.jobs_table,
            resources.bucket,
        ),
        cli=build_cli(capsys, ["--stack-name", stack_name, "--region", REGION]),
    )


@pytest.fixture
def world(moto_endpoint: str, resources: TestResources, capsys: pytest.CaptureFixture[str]) -> World:
    return create_world(moto_endpoint, resources, capsys)


# --- dlq list ----------------------------------------------------------------------------------


def test_list_joins_every_message_with_its_job(world: World) -> None:
    # Given a Failed job's message moved by the redrive policy, a Succeeded job's stray message,
    # and two poison messages the worker parked itself
    failed, done = world.failed(), world.succeeded()
    ids = {
        "failed": world.to_dlq(failed),
        "done": world.to_dlq(done),
        "garbage": world.to_dlq(body="not a job {", reason="unparseable"),
        "ghost": world.to_dlq(jobs.new_job(), reason="unknown_job"),
    }

    # When on-call lists the DLQ as JSON
    run = world.cli("dlq", "list", "--json")

    # Then every message is there with its job's facts and what a redrive would do
    assert run.code == 0
    rows = {m["messageId"]: m for m in run.document["messages"]}
    assert set(rows) == set(ids.values())
    row = rows[ids["failed"]]
    assert (row["jobId"], row["tenant"], row["status"], row["errorCode"]) == (
        failed.job_id,
        failed.tenant,
        "Failed",
        "retries_exhausted",
    )
    assert (row["attempts"], row["maxAttempts"], row["redriveCount"]) == (1, 3, 0)
    assert row["receiveCount"] >= 1
    assert row["ageSeconds"] >= 0
    assert (row["source"], row["action"]) == ("redrive policy", "redrive")
    assert rows[ids["done"]]["action"] == "drop-succeeded"
    assert (rows[ids["garbage"]]["jobId"], rows[ids["garbage"]]["source"]) == (None, "worker: unparseable")
    assert rows[ids["garbage"]]["action"] == "poison-purge-candidate"
    assert rows[ids["ghost"]]["status"] is None
    # ... the messages are visible again at once, and neither input nor output text is shown
    assert world.depth(world.queues.dlq_url) == (4, 0)
    assert "secret" not in run.out
    assert (run.document["limitReached"], run.document["timeLimitReached"]) == (False, False)


def test_list_prints_a_table_for_people(world: World) -> None:
    failed = world.failed()
    world.to_dlq(failed)
    run = world.cli("dlq", "list")
    assert run.code == 0
    header, row = run.out.splitlines()[1:3]
    assert header.split()[:3] == ["MESSAGE", "ID", "JOB"]
    assert failed.job_id in row
    assert "retries_exhausted" in row
    assert row.rstrip().endswith("redrive")


# --- dlq redrive ---------------------------------------------------------------------------------


def _snapshot(world: World, job_ids: list[str]) -> tuple[Any, ...]:
    return (
        world.depth(world.queues.dlq_url),
        world.depth(world.queues.jobs_url),
        [world.item(job_id) for job_id in job_ids],
    )


def test_dry_run_prints_the_plan_and_changes_nothing(world: World) -> None:
    # Given one message of each kind
    failed, done, policy = world.failed(), world.succeeded(), world.failed(POLICY)
    for job in (failed, done, policy):
        world.to_dlq(job)
    world.to_dlq(body="junk", reason="unparseable")
    before = _snapshot(world, [failed.job_id, done.job_id, policy.job_id])

    # When on-call asks for the dry run of everything, poison purge included
    run = world.cli("dlq", "redrive", "--all", "--purge-poison", "--dry-run", "--json")

    # Then it prints the plan, and queue depths and job records are exactly as before; the exit
    # code is the run's: the plan keeps the content-policy job's message
    assert run.code == 1
    actions = {s["jobId"]: s["action"] for s in run.document["steps"]}
    assert actions == {
        failed.job_id: "redrive",
        done.job_id: "drop-succeeded",
        policy.job_id: "needs-force",
        None: "purge-poison",
    }
    assert run.document["dryRun"] is True
    assert _snapshot(world, [failed.job_id, done.job_id, policy.job_id]) == before


def test_redrive_by_job_id_moves_only_that_job(world: World) -> None:
    # Given two Failed jobs on the DLQ
    chosen, other = world.failed(), world.failed()
    chosen_message, other_message = world.to_dlq(chosen), world.to_dlq(other)

    # When on-call redrives one of them
    run = world.cli("dlq", "redrive", "--job-id", chosen.job_id)

    # Then that job is Pending again: redriveCount + 1, attempts renewed, due now, watched again
    assert run.code == 0, run.out
    job = world.job(chosen.job_id)
    assert (job.status, job.attempts, job.redrive_count, job.error) == (JobStatus.PENDING, 0, 1, None)
    assert job.dispatch_at <= jobs.now_millis()
    assert r.SWEEP_INDEX_SORT in world.item(chosen.job_id)
    # ... one new message carries it on the jobs queue, and only its DLQ message is gone
    assert [json.loads(b)["jobId"] for b in world.peek(world.queues.jobs_url).values()] == [chosen.job_id]
    assert set(world.peek(world.queues.dlq_url)) == {other_message}
    assert world.job(other.job_id).status is JobStatus.FAILED
    assert f"[done] message {chosen_message}" in run.out


def test_a_redrive_renews_the_inputs_retention(world: World) -> None:
    # Given a Failed job whose input was given the 24 h that follow a job's end
    failed = world.failed()
    world.payloads.set_input_expiry(failed.job_id, "item", jobs.now_millis() + timedelta(hours=24))
    world.to_dlq(failed)

    # When on-call redrives it
    run = world.cli("dlq", "redrive", "--job-id", failed.job_id)

    # Then the input lives as long as the job again, so the re-run can read it
    assert run.code == 0, run.out
    input_item = world.dynamodb.get_item(
        TableName=world.resources.jobs_table,
        Key={r.PARTITION_KEY: {"S": f"JOB#{failed.job_id}"}, r.SORT_KEY: {"S": "INPUT"}},
        ConsistentRead=True,
    )["Item"]
    assert int(input_item[r.TTL_ATTRIBUTE]["N"]) == int(failed.expires_at.timestamp())


def test_a_succeeded_jobs_stray_message_is_dropped_and_nothing_is_sent(world: World) -> None:
    done, canceled = world.succeeded(), world.canceled()
    world.to_dlq(done)
    world.to_dlq(canceled)
    before = [world.item(done.job_id), world.item(canceled.job_id)]

    run = world.cli("dlq", "redrive", "--all")

    assert run.code == 0
    assert world.depth(world.queues.dlq_url) == (0, 0)
    assert world.depth(world.queues.jobs_url) == (0, 0)
    assert [world.item(done.job_id), world.item(canceled.job_id)] == before


def test_a_terminal_failure_needs_force(world: World) -> None:
    # Given a job Failed under the content policy
    policy = world.failed(POLICY)
    world.to_dlq(policy)

    # When redriven without --force, it is kept and the exit code asks for attention
    kept = world.cli("dlq", "redrive", "--error-code", "content_policy")
    assert kept.code == 1
    assert "needs-force" in kept.out
    assert world.job(policy.job_id).status is JobStatus.FAILED
    assert world.depth(world.queues.dlq_url) == (1, 0)

    # When forced, it is redriven
    forced = world.cli("dlq", "redrive", "--error-code", "content_policy", "--force")
    assert forced.code == 0
    assert world.job(policy.job_id).status is JobStatus.PENDING
    assert world.depth(world.queues.dlq_url) == (0, 0)


def test_poison_is_kept_by_all_and_purged_only_when_asked_never_re_sent(world: World) -> None:
    garbage = world.to_dlq(body="not a job {", reason="unparseable")
    ghost = world.to_dlq(jobs.new_job(), reason="unknown_job")

    kept = world.cli("dlq", "redrive", "--all")
    assert kept.code == 1
    assert set(world.peek(world.queues.dlq_url)) == {garbage, ghost}

    purged = world.cli("dlq", "redrive", "--purge-poison")
    assert purged.code == 0
    assert world.depth(world.queues.dlq_url) == (0, 0)
    assert world.depth(world.queues.jobs_url) == (0, 0)


def test_stuck_jobs_are_recovered_and_live_ones_left_to_their_worker(world: World) -> None:
    # Given a Running job whose worker died, a live Running job and a stuck Pending job
    dead, live, stuck = world.running(lease_expired=True), world.running(), world.pending()
    messages = {job.job_id: world.to_dlq(job) for job in (dead, live, stuck)}

    run = world.cli("dlq", "redrive", "--all")

    # Then the dead worker's job and the stuck job are Pending and re-sent, attempts unchanged
    assert run.code == 1  # the live job's message is kept
    recovered = world.job(dead.job_id)
    assert (recovered.status, recovered.attempts, recovered.lease_token) == (JobStatus.PENDING, 1, None)
    assert world.job(stuck.job_id).status is JobStatus.PENDING
    # ... the dead worker's claim shared its invocation, so the recover settles the lease as the
    # sweeper would: its stall given back, isolated, sent to the isolation queue; the stuck job
    # to the jobs queue
    assert (recovered.isolated, recovered.stalls, recovered.crashes) == (True, 0, 0)
    assert [json.loads(b)["jobId"] for b in world.peek(world.queues.isolation_url).values()] == [dead.job_id]
    assert [json.loads(b)["jobId"] for b in world.peek(world.queues.jobs_url).values()] == [stuck.job_id]
    # ... and the live job keeps its lease and its DLQ message
    assert world.job(live.job_id).lease_token == live.lease_token
    assert set(world.peek(world.queues.dlq_url)) == {messages[live.job_id]}


def test_several_messages_for_one_job_redrive_it_once(world: World) -> None:
    failed = world.failed()
    for _ in range(3):
        world.to_dlq(failed)

    run = world.cli("dlq", "redrive", "--job-id", failed.job_id)

    assert run.code == 0
    assert world.job(failed.job_id).redrive_count == 1
    assert len(world.peek(world.queues.jobs_url)) == 1
    assert world.depth(world.queues.dlq_url) == (0, 0)
    assert run.out.count("drop-duplicate") == 2


def test_a_job_that_moves_on_after_the_plan_is_left_alone(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a stuck Running job, and the sweeper recovering it between the plan and the write
    dead = world.running(lease_expired=True)
    message = world.to_dlq(dead)
    join = operator_dlq.join

    def join_then_sweep(*args: Any) -> Any:
        joined = join(*args)
        world.repository.transition(
            Transition(
                dead.job_id,
                JobStatus.RUNNING,
                JobStatus.PENDING,
                now=jobs.now_millis(),
                lease_token=dead.lease_token,
                dispatch_at=jobs.now_millis(),
            )
        )
        return joined

    monkeypatch.setattr(dlq_command, "join", join_then_sweep)

    # When the redrive runs
    run = world.cli("dlq", "redrive", "--job-id", dead.job_id)

    # Then its write lost, nothing was sent, and the message is kept for a rerun
    assert run.code == 1
    assert "[changed]" in run.out
    assert world.depth(world.queues.jobs_url) == (0, 0)
    assert set(world.peek(world.queues.dlq_url)) == {message}


def test_a_recover_leaves_a_job_whose_worker_renewed_its_lease_after_the_plan(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a Running job whose lease had run out when the plan read it, and its worker (slow, not
    # dead) heartbeating between the plan and the write: same lease token, lease live again
    slow = world.running(lease_expired=True)
    assert slow.lease_token is not None
    message = world.to_dlq(slow)
    join = operator_dlq.join

    def join_then_heartbeat(*args: Any) -> Any:
        joined = join(*args)
        world.repository.heartbeat(
            slow.job_id, Lease(token=slow.lease_token or "", expires_at=jobs.now_millis() + jobs.LEASE)
        )
        return joined

    monkeypatch.setattr(dlq_command, "join", join_then_heartbeat)

    # When the redrive runs
    run = world.cli("dlq", "redrive", "--job-id", slow.job_id)

    # Then the worker keeps its job (no second model call), nothing is sent, the message is kept
    assert run.code == 1, run.out
    assert "[changed]" in run.out
    job = world.job(slow.job_id)
    assert (job.status, job.lease_token) == (JobStatus.RUNNING, slow.lease_token)
    assert world.depth(world.queues.jobs_url) == (0, 0)
    assert set(world.peek(world.queues.dlq_url)) == {message}


def test_a_rerun_renews_the_input_retention_a_failed_renewal_left_short(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a Failed job whose input was given the 24 h that follow a job's end, and the renewal
    # of that retention failing during the redrive (after the job was already written Pending)
    failed = world.failed()
    short = jobs.now_millis() + timedelta(hours=24)
    world.payloads.set_input_expiry(failed.job_id, "item", short)
    world.to_dlq(failed)
    renew = DynamoS3PayloadStore.set_input_expiry

    def throttled(*_: Any, **__: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}},
            "UpdateItem",
        )

    monkeypatch.setattr(DynamoS3PayloadStore, "set_input_expiry", throttled)
    first = world.cli("dlq", "redrive", "--job-id", failed.job_id)
    assert first.code == 1
    assert "input retention not renewed" in first.out
    assert world.job(failed.job_id).status is JobStatus.PENDING
    assert world.input_ttl(failed.job_id) == int(short.timestamp())

    # When on-call reruns, as the run asked
    monkeypatch.setattr(DynamoS3PayloadStore, "set_input_expiry", renew)
    rerun = world.cli("dlq", "redrive", "--job-id", failed.job_id)

    # Then the rerun (a redispatch of the Pending job) renews the input to the job's expiry
    assert rerun.code == 0, rerun.out
    assert "redispatch" in rerun.out
    assert world.input_ttl(failed.job_id) == int(failed.expires_at.timestamp())
    assert world.job(failed.job_id).redrive_count == 1


def test_purge_poison_beside_another_selector_purges_only_the_poison_it_selected(world: World) -> None:
    # Given a Failed job's message and two poison messages
    failed = world.failed()
    world.to_dlq(failed)
    garbage = world.to_dlq(body="not a job {", reason="unparseable")
    ghost = world.to_dlq(jobs.new_job(), reason="unknown_job")

    # When on-call redrives one job with --purge-poison given too
    by_job = world.cli("dlq", "redrive", "--job-id", failed.job_id, "--purge-poison")

    # Then that job is redriven and no poison message is touched: none was selected
    assert by_job.code == 0, by_job.out
    assert world.job(failed.job_id).status is JobStatus.PENDING
    assert set(world.peek(world.queues.dlq_url)) == {garbage, ghost}

    # When one poison message is named beside --purge-poison, only that one is purged
    by_message = world.cli("dlq", "redrive", "--message-id", garbage, "--purge-poison")
    assert by_message.code == 0, by_message.out
    assert set(world.peek(world.queues.dlq_url)) == {ghost}


def test_an_unreadable_job_record_is_listed_and_left_alone(world: World) -> None:
    broken = world.failed()
    world.dynamodb.update_item(
        TableName=world.resources.jobs_table,
        Key=job_key(broken.job_id),
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "FromTheFuture"}},
    )
    world.to_dlq(broken)

    listed = world.cli("dlq", "list", "--json")
    run = world.cli("dlq", "redrive", "--all")

    [row] = listed.document["messages"]
    assert (row["action"], row["unreadable"]) == ("skip", "ValueError while reading it")
    assert run.code == 1
    assert world.depth(world.queues.dlq_url) == (1, 0)


# --- interruptions ----------------------------------------------------------------------------


def test_an_interrupt_after_the_write_leaves_a_pending_job_that_a_rerun_sends(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a Failed job on the DLQ, and Ctrl-C arriving just after its conditional write
    failed = world.failed()
    message = world.to_dlq(failed)
    send = SqsJobQueue.send

    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(SqsJobQueue, "send", interrupted)

    # When the run is interrupted
    first = world.cli("dlq", "redrive", "--job-id", failed.job_id)

    # Then the job is already Pending, its DLQ message is back (visible), nothing was sent
    assert first.code == 130
    assert "interrupted" in first.out
    assert world.job(failed.job_id).status is JobStatus.PENDING
    assert set(world.peek(world.queues.dlq_url)) == {message}
    assert world.depth(world.queues.jobs_url) == (0, 0)

    # When on-call reruns it
    monkeypatch.setattr(SqsJobQueue, "send", send)
    rerun = world.cli("dlq", "redrive", "--job-id", failed.job_id)

    # Then the rerun sees a Pending job: only sends and deletes; the job was redriven once
    assert rerun.code == 0, rerun.out
    assert "redispatch" in rerun.out
    assert world.job(failed.job_id).redrive_count == 1
    assert len(world.peek(world.queues.jobs_url)) == 1
    assert world.depth(world.queues.dlq_url) == (0, 0)


def test_an_interrupt_before_the_delete_costs_at_most_a_duplicate_message(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given Ctrl-C after the job was written and sent, before its DLQ message was deleted
    failed = world.failed()
    world.to_dlq(failed)
    delete = operator_dlq.Hold.delete

    def interrupted(*_: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(operator_dlq.Hold, "delete", interrupted)
    assert world.cli("dlq", "redrive", "--job-id", failed.job_id).code == 130
    monkeypatch.setattr(operator_dlq.Hold, "delete", delete)

    # When rerun
    rerun = world.cli("dlq", "redrive", "--job-id", failed.job_id)

    # Then nothing is lost: the job is Pending once-redriven, the DLQ is empty, and the worker has
    # two messages for it (the second claim attempt finds it taken: harmless)
    assert rerun.code == 0
    job = world.job(failed.job_id)
    assert (job.status, job.redrive_count) == (JobStatus.PENDING, 1)
    assert world.depth(world.queues.dlq_url) == (0, 0)
    assert [json.loads(b)["jobId"] for b in world.peek(world.queues.jobs_url).values()] == [failed.job_id] * 2


def test_messages_not_selected_stay_visible(world: World) -> None:
    chosen, other = world.failed(), world.failed()
    world.to_dlq(chosen)
    for _ in range(3):
        world.to_dlq(other)

    assert world.cli("dlq", "redrive", "--job-id", chosen.job_id).code == 0

    assert world.depth(world.queues.dlq_url) == (3, 0)


def test_a_job_id_with_no_message_asks_for_attention(world: World) -> None:
    run = world.cli("dlq", "redrive", "--job-id", world.failed().job_id)
    assert run.code == 1
    assert "not on the DLQ now" in run.out


def test_a_dry_run_exits_as_the_run_would(world: World) -> None:
    # Given a redrivable job on the DLQ, a job that needs --force, and a job with no message
    failed, policy, absent = world.failed(), world.failed(POLICY), world.failed()
    world.to_dlq(failed)
    world.to_dlq(policy)

    # Then the dry run exits 0 only where the run would: everything selected handled as planned
    assert world.cli("dlq", "redrive", "--job-id", failed.job_id, "--dry-run").code == 0
    missing = world.cli("dlq", "redrive", "--job-id", failed.job_id, "--job-id", absent.job_id, "--dry-run")
    assert missing.code == 1
    assert f"not on the DLQ now: job {absent.job_id}" in missing.out
    assert world.cli("dlq", "redrive", "--job-id", policy.job_id, "--dry-run").code == 1
    # ... and the runs agree with their dry runs
    assert world.cli("dlq", "redrive", "--job-id", policy.job_id).code == 1
    assert world.cli("dlq", "redrive", "--job-id", failed.job_id, "--job-id", absent.job_id).code == 1


def test_usage_errors_exit_2(world: World) -> None:
    assert world.cli("dlq", "redrive").code == 2
    bad = world.cli("dlq", "redrive", "--job-id", "not-a-uuid")
    assert bad.code == 2
    assert "not a job id" in bad.err
