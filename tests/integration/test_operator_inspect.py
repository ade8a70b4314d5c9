"""`outlast ops jobs inspect` and target resolution (`--stack-name`, `--local`) against moto."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest

import outlast.local.stack
from infra.prices import read_price_table
from outlast.cli.local import DEFAULT_PORT
from outlast.cli.ops.common import DEFAULT_LOCAL_PORT
from shared.adapters.dynamo_items import job_key
from shared.adapters.step_checkpoints import DynamoStepStore
from shared.contract import Operation
from shared.job import JobInput, StepOutput, Usage
from shared.lifecycle import JobStatus
from shared.plan_parameters import PlanParameters
from shared.planner import plan_job
from shared.ports import Lease, Transition
from shared.tiers import Tier
from tests.integration.test_operator_dlq import EXHAUSTED, World, build_cli, create_world
from tests.support import jobs
from tests.support.aws import REGION

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration


@pytest.fixture
def world(moto_endpoint: str, resources: TestResources, capsys: pytest.CaptureFixture[str]) -> World:
    return create_world(moto_endpoint, resources, capsys)


def test_inspect_shows_the_internal_record_but_only_a_lease_prefix_and_no_text(world: World) -> None:
    # Given a Running job with two of its messages on the DLQ
    job = world.running()
    assert job.lease_token is not None
    messages = {world.to_dlq(job), world.to_dlq(job)}
    world.to_dlq(world.failed())

    # When on-call inspects it
    run = world.cli("jobs", "inspect", job.job_id, "--json")

    # Then the document holds the internals and where its messages are
    assert run.code == 0
    document = run.document
    assert (document["status"], document["attempts"], document["maxAttempts"]) == ("Running", 1, 3)
    assert (document["tenant"], document["owner"], document["redriveCount"]) == (job.tenant, job.owner, 0)
    assert document["lease"]["tokenPrefix"] == job.lease_token[:8] + "..."
    assert document["lease"]["live"] is True
    assert document["sweep"]["at"] is not None
    assert {m["messageId"] for m in document["messages"]["dlq"]} == messages
    assert document["messages"]["dlqDepth"] == {"visible": 3, "inFlight": 0, "delayed": 0}
    assert document["messages"]["dlqIncomplete"] is False
    assert document["input"] == {
        "location": "item",
        "address": f"table {world.resources.jobs_table}, pk=JOB#{job.job_id} sk=INPUT",
        "present": True,
        "textBytes": len(b"secret input text"),
        "details": [],
    }
    # ... and never the whole lease token, nor the input text
    assert job.lease_token not in run.out
    assert "secret" not in run.out


def test_inspect_prints_the_record_for_people(world: World) -> None:
    job = world.succeeded()
    world.to_dlq(job)

    run = world.cli("jobs", "inspect", job.job_id)

    assert run.code == 0
    lines = run.out.splitlines()
    assert lines[0].startswith(f"job {job.job_id} on the stack ")
    fields = {line.split()[0]: line for line in lines[1:] if line.startswith("  ") and line.split()}
    assert "Succeeded" in fields["status"]
    assert "18 bytes of text" in fields["result"]
    assert "not watched" in fields["sweeper"]
    assert "1 of them for this job" in fields["DLQ"]
    assert "ApproximateReceiveCount" in run.out
    assert "secret" not in run.out


def test_inspect_finds_large_payloads_in_s3_and_says_when_they_are_gone(world: World) -> None:
    # Given a job whose input went to S3, and one whose input item is gone
    large = jobs.create(world.repository, jobs.new_job(input_location="s3"))
    world.payloads.put_input(
        JobInput(job_id=large.job_id, text="x" * 9000, labels=("a", "b")), "s3", large.expires_at
    )
    gone = jobs.create(world.repository, jobs.new_job())

    big = world.cli("jobs", "inspect", large.job_id, "--json", "--no-dlq").document
    missing = world.cli("jobs", "inspect", gone.job_id, "--json", "--no-dlq").document

    assert big["input"]["address"] == f"s3://{world.resources.bucket}/inputs/{large.job_id}.json"
    assert (big["input"]["textBytes"], big["input"]["details"]) == (9000, ["2 labels"])
    assert big["messages"]["dlq"] is None
    assert (missing["input"]["present"], missing["input"]["textBytes"]) == (False, None)


def test_inspect_of_an_unknown_job_exits_1_and_a_bad_id_exits_2(world: World) -> None:
    unknown = world.cli("jobs", "inspect", jobs.new_job().job_id)
    assert unknown.code == 1
    assert "no job" in unknown.err
    assert world.cli("jobs", "inspect", "nope").code == 2


# --- targets -----------------------------------------------------------------------------------


def test_a_missing_stack_or_one_without_outlast_outputs_is_a_clear_error(
    world: World, moto_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = build_cli(capsys, ["--stack-name", "no-such-stack"])("dlq", "list")
    assert missing.code == 2
    assert "no CloudFormation stack named 'no-such-stack'" in missing.err

    other = f"{world.stack_name}-other"
    boto3.client("cloudformation", endpoint_url=moto_endpoint, region_name=REGION).create_stack(
        StackName=other,
        TemplateBody=json.dumps(
            {"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": other}}}}
        ),
    )
    not_outlast = build_cli(capsys, ["--stack-name", other])("dlq", "list")
    assert not_outlast.code == 2
    assert (
        "lacks the outputs JobsTableName, JobsQueueUrl, DlqUrl, IsolationQueueUrl, IsolationDlqUrl, "
        "PayloadBucketName" in not_outlast.err
    )


def test_local_target_reads_the_local_stacks_state_file(
    world: World,
    moto_endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a local stack's state file naming this test's resources by their logical ids
    monkeypatch.setattr(outlast.local.stack, "STATE_DIR", tmp_path)
    state: dict[str, Any] = {
        "awsEndpoint": moto_endpoint,
        "region": REGION,
        "tables": {"StorageJobsTable47C44CDA": world.resources.jobs_table, "StorageIdempotencyTable1": "x"},
        "queues": {
            "OutboxJobsQueue13669EA8": world.queues.jobs_url,
            "OutboxJobsDlqF3C0B954": world.queues.dlq_url,
            "OutboxIsolationQueue5D1F7E2A": world.queues.isolation_url,
            "OutboxIsolationDlq0A9B8C7D": world.queues.isolation_dlq_url,
            "OutboxRelayFailures4C4A023F": world.queues.relay_failures_url,
        },
        "buckets": {"StoragePayloadBucketEAD0BC18": world.resources.bucket},
        "outputs": {"DispatchGraceSeconds": 900, "MaxCrashes": 2},
    }
    (tmp_path / "stack-59123.json").write_text(json.dumps(state))
    failed = world.failed()
    world.to_dlq(failed)
    local = build_cli(capsys, ["--local", "--port", "59123"])

    # When on-call lists and redrives with --local
    listed = local("dlq", "list", "--json")
    redriven = local("dlq", "redrive", "--job-id", failed.job_id)

    # Then the local stack's resources were used
    assert listed.document["target"] == "local stack on port 59123"
    assert [m["jobId"] for m in listed.document["messages"]] == [failed.job_id]
    assert redriven.code == 0
    assert world.job(failed.job_id).status is JobStatus.PENDING


def test_the_local_default_port_is_local_ups() -> None:
    assert DEFAULT_LOCAL_PORT == DEFAULT_PORT


def test_local_target_errors(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(outlast.local.stack, "STATE_DIR", tmp_path)
    no_stack = build_cli(capsys, ["--local", "--port", "59124"])("dlq", "list")
    assert no_stack.code == 2
    assert "no local stack on port 59124" in no_stack.err
    both = build_cli(capsys, ["--local", "--stack-name", world.stack_name])("dlq", "list")
    assert both.code == 2


def test_inspect_of_a_record_it_cannot_read_says_so(world: World) -> None:
    broken = world.failed()
    world.dynamodb.update_item(
        TableName=world.resources.jobs_table,
        Key=job_key(broken.job_id),
        UpdateExpression="REMOVE #model",
        ExpressionAttributeNames={"#model": "model"},
    )
    run = world.cli("jobs", "inspect", broken.job_id)
    assert run.code == 2
    assert f"the record of job {broken.job_id} cannot be read (KeyError while reading it)" in run.err


def test_inspect_lists_a_multi_step_jobs_steps_and_its_checkpoints(world: World) -> None:
    # Given a job planned in steps, two of its map steps checkpointed
    parameters = PlanParameters(chunk_tokens=1000, step_output_tokens=100)
    text = "\n\n".join(f"Paragraph {n}. " + "The ledger moved as planned. " * 100 for n in range(4))
    job = jobs.create(world.repository, jobs.new_job().model_copy(update={"plan": parameters}))
    world.payloads.put_input(JobInput(job_id=job.job_id, text=text), "item", job.expires_at)
    steps = DynamoStepStore(world.repository._client, world.resources.jobs_table)
    usage = Usage(input_tokens=40, output_tokens=7)
    for step_id in ("m0000", "m0001"):
        steps.put_step(
            StepOutput(job_id=job.job_id, step_id=step_id, output="a summary", usage=usage),
            job.expires_at,
        )
    plan = plan_job(text, Operation.SUMMARIZE, parameters, prompt_version=job.prompt_version)
    assert plan.total_steps > 2

    # When on-call inspects it
    document = world.cli("jobs", "inspect", job.job_id, "--json", "--no-dlq").document
    lines = world.cli("jobs", "inspect", job.job_id, "--no-dlq").out

    # Then every planned step is listed, the checkpointed ones with their size and usage, no text
    listed = document["plan"]["steps"]
    assert [s["stepId"] for s in listed] == [step.step_id for step in plan.steps]
    assert [s["stepId"] for s in listed if s["checkpointed"]] == ["m0000", "m0001"]
    assert listed[0] == {
        "stepId": "m0000",
        "kind": "map",
        "reads": f"chunk 1 of {len(plan.chunks)}",
        "checkpointed": True,
        "outputBytes": len(b"a summary"),
        "usage": {"inputTokens": 40, "outputTokens": 7},
    }
    assert document["plan"]["chunkTokens"] == 1000
    assert "m0001    map    reads chunk 2" in lines
    assert "a summary" not in lines


def test_inspect_shows_a_jobs_token_cost_from_the_price_table(world: World) -> None:
    # Given a job whose calls used 12,000 tokens in (2,048 of them cached) and 500 out, at standard
    usage = Usage(
        input_tokens=12_000, output_tokens=500, cached_input_tokens=2048, tiers=frozenset({Tier.STANDARD})
    )
    job = jobs.fail(world.repository, world.running(), EXHAUSTED, usage=usage)

    # When on-call inspects it
    document = world.cli("jobs", "inspect", job.job_id, "--json", "--no-dlq").document
    people = world.cli("jobs", "inspect", job.job_id, "--no-dlq").out

    # Then the cost is the price table's, cached input at its own price
    price = read_price_table().price(job.model, Tier.STANDARD)
    assert price is not None
    expected = price.cost(12_000, 2048, 500)
    assert document["tokenCostUsd"] == {"low": round(expected, 8), "high": round(expected, 8)}
    assert document["usage"]["cachedInputTokens"] == 2048
    assert document["usage"]["tiers"] == ["standard"]
    assert f"${expected:.6f}" in people


def test_inspect_shows_what_a_batch_job_waits_on(world: World) -> None:
    # Given a batch job whose claim handed its call to the batcher, now in provider batch batch_7
    job = jobs.create(world.repository, jobs.new_job().model_copy(update={"tier": Tier.BATCH}))
    world.payloads.put_input(JobInput(job_id=job.job_id, text="text"), "item", job.expires_at)
    running = jobs.claim(world.repository, job.job_id, token="hold")
    hold = Lease(token="hold", expires_at=jobs.now_millis() + timedelta(hours=25))
    world.repository.hold_for_batch(running.job_id, hold)
    world.repository.record_batch(running.job_id, "hold", "batch_7")

    # When on-call inspects it
    document = world.cli("jobs", "inspect", job.job_id, "--json", "--no-dlq").document
    people = world.cli("jobs", "inspect", job.job_id, "--no-dlq").out

    # Then it says what the job waits on, and where
    assert document["batch"] == {
        "waitingFor": "provider_batch",
        "batchId": "batch_7",
        "fallback": False,
        "lateTokens": 0,
    }
    assert "batch, waiting on provider batch batch_7" in people


def test_inspect_shows_the_late_tokens_of_a_batch_job_canceled_in_its_batch(world: World) -> None:
    # Given a batch job canceled while its batch ran, the batch's answer to it counted late
    job = jobs.create(world.repository, jobs.new_job().model_copy(update={"tier": Tier.BATCH}))
    world.payloads.put_input(JobInput(job_id=job.job_id, text="text"), "item", job.expires_at)
    jobs.claim(world.repository, job.job_id, token="hold")
    now = jobs.now_millis()
    for source, target in (
        (JobStatus.RUNNING, JobStatus.CANCELLATION_REQUESTED),
        (JobStatus.CANCELLATION_REQUESTED, JobStatus.CANCELED),
    ):
        world.repository.transition(
            Transition(
                job_id=job.job_id,
                source=source,
                target=target,
                now=now,
                lease_token="hold",
                cancel_requested_at=now,
            )
        )
    world.repository.count_late_usage(job.job_id, "batch_7", Usage(input_tokens=1_000, output_tokens=234))

    # When on-call inspects it
    document = world.cli("jobs", "inspect", job.job_id, "--json", "--no-dlq").document
    people = world.cli("jobs", "inspect", job.job_id, "--no-dlq").out

    # Then it shows the late tokens, which its usage holds
    assert document["batch"]["lateTokens"] == 1_234
    assert document["usage"]["inputTokens"] == 1_000
    assert "1,234 tokens of answers discarded after it ended" in people
