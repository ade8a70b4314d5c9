"""On-call at 3 am, end to end on the local stack: `dlq list`, `dlq redrive` and `jobs inspect`.

How each message reaches the DLQ (the scene is built once for the module):
- poison: a garbage body and a message for a job that does not exist go on the jobs queue; the
  worker parks them on the DLQ itself (attribute `reason` = unparseable / unknown_job).
- repeated worker death: a job record the worker cannot read (a status from a newer version, as
  after a rollback) makes the worker fail on its message at every delivery. The jobs queue's
  visibility is cut to 1 s meanwhile so the six failed deliveries take seconds, not hours; the
  queue's own redrive policy (maxReceiveCount 6) then moves the message, untouched, to the DLQ.
  Then the record is repaired (the "fix the cause" step), leaving a stuck Pending job whose only
  message is on the DLQ. It is repaired without sweeper-index keys, so the sweeper (whose grace is
  6 s here) cannot re-send it before the operator does.
- a Failed job: `[[fault:rate_limit*3]]` fails three times and ends Failed/retries_exhausted on its
  own; its message is then put on the DLQ as the redrive policy would have moved it. The model
  server counts faults per request, so after the redrive the fourth call succeeds.
- a Succeeded job's stray message: its body sent straight to the DLQ.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from outlast.commands import dlq, operator_jobs
from outlast.commands.local import local_client
from outlast.operator.dlq import held_messages, queue_depth
from outlast.operator.targets import Target, local_target
from shared.adapters.dynamo_items import job_key, job_to_item
from shared.adapters.sqs_queue import SqsJobQueue, encode_message
from shared.job import Caller, JobInput
from shared.lifecycle import JobStatus
from shared.ports import JobMessage
from tests.support.jobs import new_job
from tests.support.local_stack import RunningStack

pytestmark = pytest.mark.e2e

REDRIVE_POLICY_RECEIVES = 6  # maxReceiveCount = maxAttempts (3) + 3


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def document(self) -> Any:
        return json.loads(self.out)


@dataclass
class Scene:
    """The local stack, the operator's view of it, and the jobs and messages the module made."""

    stack: RunningStack
    target: Target
    token: str
    crash_id: str
    failed_id: str
    done_id: str
    interrupt_id: str
    garbage_body: str
    ghost_id: str

    def cli(self, *argv: str) -> Run:
        """Run an operator command in this process, against the local stack."""
        parser = argparse.ArgumentParser(prog="outlast")
        commands = parser.add_subparsers(dest="command", required=True)
        dlq.register(commands)
        operator_jobs.register(commands)
        arguments = parser.parse_args([*argv, "--local", "--port", str(self.stack.port)])
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = arguments.run(arguments)
        return Run(code, out.getvalue(), err.getvalue())

    def dlq_letters(self) -> dict[str, Any]:
        """Message id -> DLQ message, read and released at once."""
        with held_messages(
            self.target.sqs, self.target.resources.dlq_url, hold_seconds=10, max_messages=1000, wait_seconds=0
        ) as hold:
            return {letter.message_id: letter for letter in hold.letters}

    def dlq_ids_of(self, job_id: str) -> set[str]:
        return {m for m, letter in self.dlq_letters().items() if letter.job_id == job_id}

    def job(self, job_id: str) -> Any:
        found = self.target.repository.get_job(job_id)
        assert found is not None
        return found

    def item(self, job_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.target.dynamodb.get_item(
            TableName=self.target.resources.jobs_table, Key=job_key(job_id), ConsistentRead=True
        )["Item"]
        return found

    def depths(self) -> tuple[Any, Any]:
        sqs, resources = self.target.sqs, self.target.resources
        return queue_depth(sqs, resources.dlq_url), queue_depth(sqs, resources.jobs_queue_url)

    def model_calls(self) -> list[dict[str, Any]]:
        url = str(self.stack.state["modelUrl"]).removesuffix("/v1") + "/_calls"
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
            calls: list[dict[str, Any]] = json.loads(response.read())
        return calls

    def wait_job(self, job_id: str, status: JobStatus, timeout_seconds: float = 60) -> Any:
        return wait_for(lambda: (job := self.job(job_id)).status is status and job, timeout_seconds)


def wait_for(check: Callable[[], Any], timeout_seconds: float = 60) -> Any:
    deadline = time.monotonic() + timeout_seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError("the expected state was not reached in time")
        time.sleep(0.3)


def submit(stack: RunningStack, token: str, text: str) -> str:
    """Submit a summarize job through the API; its id."""
    answer = stack.call(
        "POST",
        "/v1/jobs",
        token=token,
        body={"operation": "summarize", "input": {"text": text}},
        headers={"Idempotency-Key": f"oncall-{uuid.uuid4()}"},
    )
    assert answer.status == 202, answer.body
    return str(answer.body["jobId"])


def rate_limited_thrice(stack: RunningStack, token: str, text: str) -> str:
    """A job whose three model calls are all rate limited: it ends Failed/retries_exhausted."""
    return submit(stack, token, f"[[fault:rate_limit*3]] {text} {uuid.uuid4()}")


def _crash_loop_into_the_dlq(stack: RunningStack, target: Target) -> str:
    """A job whose record the worker cannot read: its message fails at every delivery until the
    queue's redrive policy moves it to the DLQ; then the record is repaired (stuck Pending)."""
    sqs, dynamodb, resources = target.sqs, target.dynamodb, target.resources
    job = new_job(Caller(tenant="oncall", sub=str(uuid.uuid4())))
    target.payloads.put_input(
        JobInput(job_id=job.job_id, text="Crash loop. Then repaired."), "item", job.expires_at
    )
    item = job_to_item(job, sweep_at=None)
    item["status"] = {"S": "FromANewerVersion"}
    original = sqs.get_queue_attributes(
        QueueUrl=resources.jobs_queue_url, AttributeNames=["VisibilityTimeout"]
    )
    sqs.set_queue_attributes(QueueUrl=resources.jobs_queue_url, Attributes={"VisibilityTimeout": "1"})
    try:
        # Its INSERT reaches the relay like any new job's: the worker gets the message and fails.
        dynamodb.put_item(TableName=resources.jobs_table, Item=item)

        def dead_lettered() -> bool:
            # The relay delivers at least once: wait until no copy is left on the jobs queue either,
            # or a copy would run the repaired job before the operator's redrive.
            jobs_queue_empty = queue_depth(sqs, resources.jobs_queue_url).total == 0
            return jobs_queue_empty and any(letter.job_id == job.job_id for letter in _letters(target))

        wait_for(dead_lettered, 90)
        time.sleep(2)
        wait_for(dead_lettered, 90)
    finally:
        sqs.set_queue_attributes(QueueUrl=resources.jobs_queue_url, Attributes=original["Attributes"])
    # The fix: the record is readable again (and the worker no longer has a message for it).
    dynamodb.update_item(
        TableName=resources.jobs_table,
        Key=job_key(job.job_id),
        UpdateExpression="SET #status = :pending",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={":pending": {"S": JobStatus.PENDING.value}},
    )
    return job.job_id


def _letters(target: Target) -> list[Any]:
    with held_messages(
        target.sqs, target.resources.dlq_url, hold_seconds=10, max_messages=1000, wait_seconds=0
    ) as hold:
        return list(hold.letters)


@pytest.fixture(scope="module")
def scene(stack: RunningStack) -> Iterator[Scene]:
    target = local_target(stack.port)
    token = stack.token("oncall-e2e", "oncall")
    # Repeated worker death, first, while nothing else is on the jobs queue.
    crash_id = _crash_loop_into_the_dlq(stack, target)
    # Poison, parked by the worker itself.
    sqs = local_client("sqs", stack.state)
    garbage_body = f"not a job message {uuid.uuid4()} {{"
    ghost_id = str(uuid.uuid4())
    sqs.send_message(QueueUrl=target.resources.jobs_queue_url, MessageBody=garbage_body)
    sqs.send_message(
        QueueUrl=target.resources.jobs_queue_url,
        MessageBody=encode_message(JobMessage(job_id=ghost_id, trace_id="oncall-e2e")),
    )
    # Failed jobs, and a Succeeded one.
    failed_id = rate_limited_thrice(stack, token, "Redrive me by id.")
    interrupt_id = rate_limited_thrice(stack, token, "Redrive me after an interruption.")
    done_id = submit(stack, token, f"All is well. {uuid.uuid4()}")
    for job_id, status in ((failed_id, "Failed"), (interrupt_id, "Failed"), (done_id, "Succeeded")):
        assert stack.wait_terminal(job_id, token)["status"] == status
    # Their messages on the DLQ, as the redrive policy (failed) or a stray duplicate (done) would leave them.
    for job_id in (failed_id, interrupt_id, done_id):
        sqs.send_message(
            QueueUrl=target.resources.dlq_url,
            MessageBody=encode_message(JobMessage(job_id=job_id, trace_id="oncall-e2e")),
        )

    def parked() -> bool:
        letters = _letters(target)
        return any(letter.body == garbage_body for letter in letters) and any(
            letter.job_id == ghost_id for letter in letters
        )

    wait_for(parked)
    yield Scene(stack, target, token, crash_id, failed_id, done_id, interrupt_id, garbage_body, ghost_id)
    # Whatever a failed test left of this module's messages goes, so later modules start clean.
    mine = {crash_id, failed_id, done_id, interrupt_id, ghost_id}
    with held_messages(
        target.sqs, target.resources.dlq_url, hold_seconds=10, max_messages=1000, wait_seconds=0
    ) as hold:
        for letter in hold.letters:
            if letter.job_id in mine or letter.body == garbage_body:
                hold.delete(letter.message_id)


def test_jobs_pushed_into_the_dlq_appear_in_dlq_list(scene: Scene) -> None:
    # When on-call lists the DLQ
    run = scene.cli("dlq", "list", "--json")

    # Then the crash-looped job's message is there, moved by the redrive policy after six deliveries
    assert run.code == 0
    rows = run.document["messages"]
    by_job = {row["jobId"]: row for row in reversed(rows)}  # a job's first message wins
    crash = by_job[scene.crash_id]
    assert (crash["status"], crash["attempts"], crash["tenant"]) == ("Pending", 0, "oncall")
    assert crash["source"] == "redrive policy"
    assert crash["receiveCount"] > REDRIVE_POLICY_RECEIVES
    assert crash["action"] == "redispatch"
    # ... the poison the worker parked, with its reason
    [garbage] = [row for row in rows if row["jobId"] is None and row["reason"] == "unparseable"]
    assert garbage["action"] == "poison-purge-candidate"
    assert (by_job[scene.ghost_id]["source"], by_job[scene.ghost_id]["status"]) == (
        "worker: unknown_job",
        None,
    )
    # ... and the Failed and Succeeded jobs, joined with their records
    failed = by_job[scene.failed_id]
    assert (failed["status"], failed["errorCode"], failed["attempts"], failed["action"]) == (
        "Failed",
        "retries_exhausted",
        3,
        "redrive",
    )
    assert by_job[scene.done_id]["action"] == "drop-succeeded"
    # ... and the table for people says the same
    table = scene.cli("dlq", "list")
    assert table.code == 0
    assert any(
        scene.crash_id in line and line.rstrip().endswith("redispatch") for line in table.out.splitlines()
    )


def test_dry_run_changes_nothing(scene: Scene) -> None:
    # Given the queues and the job records as they are
    ids = [scene.crash_id, scene.failed_id, scene.done_id, scene.interrupt_id]
    before = (scene.depths(), [scene.item(job_id) for job_id in ids])

    # When on-call dry-runs the widest redrive there is
    run = scene.cli("dlq", "redrive", "--all", "--force", "--purge-poison", "--dry-run", "--json")

    # Then the plan covers every message, and queue depths and job records are identical
    assert run.code == 0
    actions = {step["jobId"]: step["action"] for step in run.document["steps"]}
    assert actions[scene.crash_id] == "redispatch"
    assert actions[scene.failed_id] == "redrive"
    assert actions[scene.done_id] == "drop-succeeded"
    assert actions[scene.ghost_id] == "purge-poison"
    assert (scene.depths(), [scene.item(job_id) for job_id in ids]) == before


def test_redrive_by_job_id_moves_only_that_job_and_it_then_succeeds(scene: Scene) -> None:
    # Given the DLQ as it is, and the model calls so far
    others = set(scene.dlq_letters()) - scene.dlq_ids_of(scene.failed_id)
    calls_before = len(scene.model_calls())

    # When on-call redrives the Failed job by its id
    run = scene.cli("dlq", "redrive", "--job-id", scene.failed_id)

    # Then only its message left the DLQ
    assert run.code == 0, run.out
    assert set(scene.dlq_letters()) == others
    # ... and the job ran again and succeeded: one more model call (the fault counter is spent)
    document = scene.stack.wait_terminal(scene.failed_id, scene.token)
    assert (document["status"], document["attempts"], document["error"]) == ("Succeeded", 1, None)
    assert scene.job(scene.failed_id).redrive_count == 1
    assert len(scene.model_calls()) == calls_before + 1
    inspected = scene.cli("jobs", "inspect", scene.failed_id, "--json").document
    assert (inspected["redriveCount"], inspected["result"]["present"]) == (1, True)


def test_a_succeeded_jobs_stray_message_is_dropped_without_a_model_call(scene: Scene) -> None:
    # Given the Succeeded job's record and result, and the model calls so far
    item = scene.item(scene.done_id)
    result = scene.stack.call("GET", f"/v1/jobs/{scene.done_id}/result", token=scene.token).body
    calls_before = len(scene.model_calls())

    # When its stray message is redriven
    run = scene.cli("dlq", "redrive", "--job-id", scene.done_id)

    # Then the message is dropped, and nothing ran: same record, same result, no model call
    assert run.code == 0
    assert "drop-succeeded" in run.out
    assert scene.dlq_ids_of(scene.done_id) == set()
    time.sleep(3)  # a wrongly sent message would have been claimed by now
    assert scene.item(scene.done_id) == item
    assert scene.stack.call("GET", f"/v1/jobs/{scene.done_id}/result", token=scene.token).body == result
    assert len(scene.model_calls()) == calls_before


def test_an_interrupted_redrive_rerun_loses_nothing(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given Ctrl-C arriving right after the conditional write, before the new message is sent
    [message] = scene.dlq_ids_of(scene.interrupt_id)
    send = SqsJobQueue.send

    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(SqsJobQueue, "send", interrupted)

    # When the redrive is interrupted
    first = scene.cli("dlq", "redrive", "--job-id", scene.interrupt_id)

    # Then the job is Pending (redriven once) and its DLQ message is back on the DLQ, visible
    assert first.code == 130
    pending = scene.job(scene.interrupt_id)
    assert (pending.status, pending.redrive_count, pending.attempts) == (JobStatus.PENDING, 1, 0)
    assert scene.dlq_ids_of(scene.interrupt_id) == {message}

    # When on-call reruns the same command
    monkeypatch.setattr(SqsJobQueue, "send", send)
    rerun = scene.cli("dlq", "redrive", "--job-id", scene.interrupt_id)

    # Then the rerun recognises the Pending job: it only sends and deletes; the job succeeds,
    # redriven once, and its DLQ message is gone
    assert rerun.code == 0, rerun.out
    assert "redispatch" in rerun.out
    document = scene.stack.wait_terminal(scene.interrupt_id, scene.token)
    assert document["status"] == "Succeeded"
    assert scene.job(scene.interrupt_id).redrive_count == 1
    assert scene.dlq_ids_of(scene.interrupt_id) == set()


def test_the_crash_looped_job_runs_once_its_cause_is_fixed(scene: Scene) -> None:
    inspected = scene.cli("jobs", "inspect", scene.crash_id)
    assert inspected.code == 0
    assert f"{len(scene.dlq_ids_of(scene.crash_id))} of them for this job" in inspected.out

    run = scene.cli("dlq", "redrive", "--job-id", scene.crash_id)

    assert run.code == 0, run.out
    job = scene.wait_job(scene.crash_id, JobStatus.SUCCEEDED)
    assert (job.attempts, job.redrive_count) == (1, 0)
    assert scene.dlq_ids_of(scene.crash_id) == set()


def test_poison_is_purged_only_when_asked_and_never_re_sent(scene: Scene) -> None:
    poison = {m for m, letter in scene.dlq_letters().items() if letter.body == scene.garbage_body}
    poison |= scene.dlq_ids_of(scene.ghost_id)
    calls_before = len(scene.model_calls())

    selected = [arg for message in sorted(poison) for arg in ("--message-id", message)]
    kept = scene.cli("dlq", "redrive", *selected)
    assert kept.code == 1
    assert poison <= set(scene.dlq_letters())

    purged = scene.cli("dlq", "redrive", *selected, "--purge-poison")
    assert purged.code == 0, purged.out
    assert not poison & set(scene.dlq_letters())
    assert len(scene.model_calls()) == calls_before
