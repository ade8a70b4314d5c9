"""On-call at 3 am, end to end on the local stack: `dlq list`, `dlq redrive`, `jobs inspect` and
`jobs redrive`.

How each message reaches the DLQ (the scene is built once for the module):
- poison: a garbage body and a message for a job that does not exist go on the jobs queue; the
  worker parks them on the DLQ itself (attribute `reason` = unparseable / unknown_job).
- repeated worker death: a job record the worker cannot read (a status written by a newer
  version, as after a rollback) makes the worker fail on its message at every delivery: the
  message is received and never deleted, as with a worker that dies. The jobs queue's visibility
  is cut to 1 s meanwhile so that the six deliveries take seconds, not hours; the queue's own
  redrive policy (maxReceiveCount 6) then moves the message, untouched, to the DLQ. The record
  stays unreadable until the test that fixes the cause (copies of the message the worker's
  pollers still held fail on it harmlessly meanwhile), and it carries no sweeper-index keys, so
  the sweeper never sees it: once repaired, the job is stuck Pending with its only message on
  the DLQ.
- a Failed job: `[[fault:rate_limit*3]]` fails three times and ends Failed/retries_exhausted on its
  own; its message is then put on the DLQ as the redrive policy would have moved it. The model
  server counts faults per request, so after the redrive the fourth call succeeds.
- a Succeeded job's stray message: its body sent straight to the DLQ.

And a Failed job with no message anywhere (the worker finished it): `[[fault:rate_limit*3]]`
again, which only `jobs redrive` can bring back.

Jobs are watched through the operator's own view (the jobs table), not the status API, so a slow
API on a busy machine cannot fail the test.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from outlast.local.fake_model.requests import messages_hash
from outlast.operator.dlq import Hold, held_messages, queue_depth
from outlast.operator.plan import DeadLetter
from outlast.operator.targets import Target, local_target
from shared.adapters.dynamo_items import job_key, job_to_item
from shared.adapters.sqs_queue import SqsJobQueue, encode_message
from shared.clock import to_iso, truncate_to_millis
from shared.contract import Operation
from shared.job import Caller, JobInput, JobRecord
from shared.lifecycle import JobStatus
from shared.payload_reads import result_of
from shared.ports import JobMessage
from shared.prompts import template_for
from tests.support.cli import run as run_cli
from tests.support.jobs import new_job
from tests.support.local_stack import RunningStack

pytestmark = pytest.mark.e2e

REDRIVE_POLICY_RECEIVES = 6  # maxReceiveCount = maxAttempts (3) + 3
UNREADABLE_STATUS = "FromANewerVersion"


@dataclass
class Run:
    """One operator command: its exit code and output."""

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
    crash_id: str
    failed_id: str
    done_id: str
    interrupt_id: str
    garbage_body: str
    ghost_id: str
    texts: dict[str, str]  # job id -> its input text, to find its model calls

    def cli(self, *argv: str) -> Run:
        """Run an operator command in this process, against the local stack."""
        code, out, err = run_cli("ops", *argv, "--local", "--port", str(self.stack.port))
        return Run(code, out, err)

    def dlq_letters(self) -> dict[str, DeadLetter]:
        """Message id -> DLQ message, read and released at once."""
        return {letter.message_id: letter for letter in read_dlq(self.target)}

    def dlq_ids_of(self, job_id: str) -> set[str]:
        return {m for m, letter in self.dlq_letters().items() if letter.job_id == job_id}

    def job(self, job_id: str) -> JobRecord:
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

    def queues_idle(self) -> bool:
        """Nothing visible, in flight or delayed on the jobs queue or the isolation queue."""
        sqs, resources = self.target.sqs, self.target.resources
        for url in (resources.jobs_queue_url, resources.isolation_queue_url):
            depth = queue_depth(sqs, url)
            if depth.visible or depth.in_flight or depth.delayed:
                return False
        return True

    def model_calls(self, job_id: str) -> list[int | None]:
        """The status of every model call made for the job so far (the server keys calls by prompt)."""
        url = str(self.stack.state["modelUrl"]).removesuffix("/v1") + "/_calls"
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
            calls: list[dict[str, Any]] = json.loads(response.read())
        prompt = messages_hash(template_for(Operation.SUMMARIZE).render(self.texts[job_id], None))
        return [call["status"] for call in calls if call["requestHash"] == prompt]

    def wait_job(self, job_id: str, status: JobStatus, timeout_seconds: float = 90) -> JobRecord:
        return wait_job(self.target, job_id, status, timeout_seconds)


def wait_for(check: Callable[[], Any], timeout_seconds: float = 60) -> Any:
    deadline = time.monotonic() + timeout_seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError("the expected state was not reached in time")
        time.sleep(0.3)


def wait_job(target: Target, job_id: str, status: JobStatus, timeout_seconds: float = 90) -> JobRecord:
    def reached() -> JobRecord | None:
        job = target.repository.get_job(job_id)
        return job if job is not None and job.status is status else None

    found: JobRecord = wait_for(reached, timeout_seconds)
    return found


def hold_dlq(target: Target) -> AbstractContextManager[Hold]:
    """Every DLQ message, held briefly (released on the way out unless deleted)."""
    return held_messages(
        target.sqs,
        target.resources.dlq_url,
        hold_seconds=10,
        max_messages=1000,
        wait_seconds=0,
        monotonic=time.monotonic,
    )


def read_dlq(target: Target) -> list[DeadLetter]:
    with hold_dlq(target) as hold:
        return list(hold.letters)


def submit(stack: RunningStack, token: str, text: str, texts: dict[str, str]) -> str:
    """Submit a summarize job through the API (retried on a 5xx: the key makes that safe)."""
    key = f"oncall-{uuid.uuid4()}"
    body = {"operation": "summarize", "input": {"text": text}}

    def accepted() -> Any:
        answer = stack.call("POST", "/v1/jobs", token=token, body=body, headers={"Idempotency-Key": key})
        assert answer.status in {202, 500, 502, 503, 504}, answer.body
        return answer.body if answer.status == 202 else None

    job_id = str(wait_for(accepted)["jobId"])
    texts[job_id] = text
    return job_id


def rate_limited_thrice(stack: RunningStack, token: str, text: str, texts: dict[str, str]) -> str:
    """A job whose three model calls are all rate limited: it ends Failed/retries_exhausted."""
    return submit(stack, token, f"[[fault:rate_limit*3]] {text} {uuid.uuid4()}", texts)


def crash_loop_into_the_dlq(target: Target) -> str:
    """A job whose record the worker cannot read: its message fails at every delivery until the
    jobs queue's redrive policy moves it to the DLQ. The record stays unreadable."""
    sqs, resources = target.sqs, target.resources
    job = new_job(Caller(tenant="oncall", sub=str(uuid.uuid4())))
    target.payloads.put_input(
        JobInput(job_id=job.job_id, text="Crash loop. Then repaired."), "item", job.expires_at
    )
    item = job_to_item(job, sweep_at=None)  # no sweeper-index keys: only the DLQ brings it back
    item["status"] = {"S": UNREADABLE_STATUS}
    original = sqs.get_queue_attributes(
        QueueUrl=resources.jobs_queue_url, AttributeNames=["VisibilityTimeout"]
    )
    sqs.set_queue_attributes(QueueUrl=resources.jobs_queue_url, Attributes={"VisibilityTimeout": "1"})
    try:
        # Its INSERT reaches the relay like any new job's: the worker gets the message and fails.
        target.dynamodb.put_item(TableName=resources.jobs_table, Item=item)
        wait_for(lambda: any(letter.job_id == job.job_id for letter in read_dlq(target)), 90)
    finally:
        sqs.set_queue_attributes(QueueUrl=resources.jobs_queue_url, Attributes=original["Attributes"])
    return job.job_id


@pytest.fixture(scope="module")
def scene(stack: RunningStack) -> Iterator[Scene]:
    target = local_target(stack.port)
    token = stack.token("oncall-e2e", "oncall")
    # Repeated worker death first, while nothing else is on the jobs queue.
    crash_id = crash_loop_into_the_dlq(target)
    # Poison, parked by the worker itself.
    garbage_body = f"not a job message {uuid.uuid4()} {{"
    ghost_id = str(uuid.uuid4())
    for body in (garbage_body, encode_message(JobMessage(job_id=ghost_id, trace_id="oncall-e2e"))):
        target.sqs.send_message(QueueUrl=target.resources.jobs_queue_url, MessageBody=body)
    # Failed jobs, and a Succeeded one.
    texts: dict[str, str] = {}
    failed_id = rate_limited_thrice(stack, token, "Redrive me by id.", texts)
    interrupt_id = rate_limited_thrice(stack, token, "Redrive me after an interruption.", texts)
    done_id = submit(stack, token, f"All is well. {uuid.uuid4()}", texts)
    for job_id, status in ((failed_id, JobStatus.FAILED), (interrupt_id, JobStatus.FAILED)):
        assert wait_job(target, job_id, status).error is not None
    wait_job(target, done_id, JobStatus.SUCCEEDED)
    # Their messages on the DLQ, as the redrive policy (Failed) or a stray duplicate (Succeeded) leaves them.
    for job_id in (failed_id, interrupt_id, done_id):
        target.sqs.send_message(
            QueueUrl=target.resources.dlq_url,
            MessageBody=encode_message(JobMessage(job_id=job_id, trace_id="oncall-e2e")),
        )

    def parked() -> bool:
        letters = read_dlq(target)
        return any(letter.body == garbage_body for letter in letters) and any(
            letter.job_id == ghost_id for letter in letters
        )

    wait_for(parked)
    yield Scene(stack, target, crash_id, failed_id, done_id, interrupt_id, garbage_body, ghost_id, texts)
    # Whatever a failed test left of this module's messages goes, so later modules start clean.
    mine = {crash_id, failed_id, done_id, interrupt_id, ghost_id}
    with hold_dlq(target) as hold:
        for letter in hold.letters:
            if letter.job_id in mine or letter.body == garbage_body:
                hold.delete(letter.message_id)


def test_jobs_pushed_into_the_dlq_appear_in_dlq_list(scene: Scene) -> None:
    # When on-call lists the DLQ
    run = scene.cli("dlq", "list", "--json")

    # Then the crash-looped job's message is there, moved by the redrive policy after six
    # deliveries, next to the record the worker kept failing on
    assert run.code == 0
    rows = run.document["messages"]
    by_job = {row["jobId"]: row for row in reversed(rows)}  # a job's first message wins
    crash = by_job[scene.crash_id]
    assert crash["source"] == "redrive policy"
    assert crash["receiveCount"] > REDRIVE_POLICY_RECEIVES
    assert (crash["unreadable"], crash["action"]) == ("ValueError while reading it", "skip")
    # ... the poison the worker parked, with its reason
    [garbage] = [row for row in rows if row["jobId"] is None and row["reason"] == "unparseable"]
    assert garbage["action"] == "poison-purge-candidate"
    ghost = by_job[scene.ghost_id]
    assert (ghost["source"], ghost["status"], ghost["action"]) == (
        "worker: unknown_job",
        None,
        "poison-purge-candidate",
    )
    # ... and the Failed and Succeeded jobs, joined with their records
    failed = by_job[scene.failed_id]
    assert (failed["status"], failed["errorCode"], failed["attempts"], failed["tenant"]) == (
        "Failed",
        "retries_exhausted",
        3,
        "oncall",
    )
    assert failed["action"] == "redrive"
    assert by_job[scene.done_id]["action"] == "drop-succeeded"
    # ... and the table for people says the same
    table = scene.cli("dlq", "list")
    assert table.code == 0
    lines = table.out.splitlines()
    assert any(scene.failed_id in line and line.rstrip().endswith(" redrive") for line in lines)
    assert any(scene.crash_id in line and "(unreadable)" in line for line in lines)


def test_dry_run_changes_nothing(scene: Scene) -> None:
    # Given the queues and the job records as they are
    ids = [scene.crash_id, scene.failed_id, scene.done_id, scene.interrupt_id]
    before = (scene.depths(), [scene.item(job_id) for job_id in ids])

    # When on-call dry-runs the widest redrive there is
    run = scene.cli("dlq", "redrive", "--all", "--force", "--purge-poison", "--dry-run", "--json")

    # Then the plan covers every message, and queue depths and job records are identical; it
    # exits as the run would: 1, since the plan keeps the crash-looped job's message (skip)
    assert run.code == 1
    actions = {step["jobId"]: step["action"] for step in run.document["steps"]}
    assert actions[scene.failed_id] == "redrive"
    assert actions[scene.done_id] == "drop-succeeded"
    assert actions[scene.ghost_id] == "purge-poison"
    assert actions[scene.crash_id] == "skip"
    assert (scene.depths(), [scene.item(job_id) for job_id in ids]) == before


def test_redrive_by_job_id_moves_only_that_job_and_it_then_succeeds(scene: Scene) -> None:
    # Given the DLQ as it is, and the job's three rate-limited model calls
    others = set(scene.dlq_letters()) - scene.dlq_ids_of(scene.failed_id)
    assert scene.model_calls(scene.failed_id) == [429, 429, 429]

    # When on-call redrives the Failed job by its id
    run = scene.cli("dlq", "redrive", "--job-id", scene.failed_id)

    # Then only its message left the DLQ
    assert run.code == 0, run.out
    assert scene.dlq_ids_of(scene.failed_id) == set()
    assert others <= set(scene.dlq_letters())
    # ... and the job ran again and succeeded: one more model call (the fault counter is spent)
    job = scene.wait_job(scene.failed_id, JobStatus.SUCCEEDED)
    assert (job.attempts, job.redrive_count, job.error) == (1, 1, None)
    assert scene.model_calls(scene.failed_id) == [429, 429, 429, 200]
    inspected = scene.cli("jobs", "inspect", scene.failed_id, "--json").document
    assert (inspected["redriveCount"], inspected["result"]["present"]) == (1, True)


def test_a_succeeded_jobs_stray_message_is_dropped_without_a_model_call(scene: Scene) -> None:
    # Given the Succeeded job's record and result, and its one model call
    item = scene.item(scene.done_id)
    job = scene.job(scene.done_id)
    result = result_of(job, scene.target.payloads)
    assert result is not None
    assert scene.model_calls(scene.done_id) == [200]

    # When its stray message is redriven
    run = scene.cli("dlq", "redrive", "--job-id", scene.done_id)

    # Then the message is dropped, and nothing ran: same record, same result, no model call
    assert run.code == 0, run.out
    assert "drop-succeeded" in run.out
    assert scene.dlq_ids_of(scene.done_id) == set()
    # Once both queues are idle, a message sent by mistake would have been received and handled
    wait_for(scene.queues_idle, timeout_seconds=120)
    assert scene.item(scene.done_id) == item
    assert result_of(scene.job(scene.done_id), scene.target.payloads) == result
    assert scene.model_calls(scene.done_id) == [200]


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
    job = scene.wait_job(scene.interrupt_id, JobStatus.SUCCEEDED)
    assert (job.redrive_count, job.attempts) == (1, 1)
    assert scene.model_calls(scene.interrupt_id) == [429, 429, 429, 200]
    assert scene.dlq_ids_of(scene.interrupt_id) == set()


def test_the_crash_looped_job_runs_once_its_cause_is_fixed(scene: Scene) -> None:
    # Given the unreadable record, which the operator view names as such
    broken = scene.cli("jobs", "inspect", scene.crash_id)
    assert broken.code == 2
    assert "cannot be read" in broken.err

    # When the cause is fixed (the record readable again: a stuck Pending job) and it is redriven
    scene.target.dynamodb.update_item(
        TableName=scene.target.resources.jobs_table,
        Key=job_key(scene.crash_id),
        UpdateExpression="SET #status = :pending",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={":pending": {"S": JobStatus.PENDING.value}},
    )
    messages = scene.dlq_ids_of(scene.crash_id)
    inspected = scene.cli("jobs", "inspect", scene.crash_id)
    assert inspected.code == 0
    assert f"{len(messages)} of them for this job" in inspected.out
    run = scene.cli("dlq", "redrive", "--job-id", scene.crash_id)

    # Then it is dispatched again and runs to the end; its DLQ message(s) are gone
    assert run.code == 0, run.out
    assert "redispatch" in run.out
    job = scene.wait_job(scene.crash_id, JobStatus.SUCCEEDED)
    assert (job.attempts, job.redrive_count) == (1, 0)
    assert scene.dlq_ids_of(scene.crash_id) == set()


def test_poison_is_purged_only_when_asked_and_never_re_sent(scene: Scene) -> None:
    poison = {m for m, letter in scene.dlq_letters().items() if letter.body == scene.garbage_body}
    poison |= scene.dlq_ids_of(scene.ghost_id)
    selected = [arg for message in sorted(poison) for arg in ("--message-id", message)]

    kept = scene.cli("dlq", "redrive", *selected)
    assert kept.code == 1
    assert poison <= set(scene.dlq_letters())

    purged = scene.cli("dlq", "redrive", *selected, "--purge-poison")
    assert purged.code == 0, purged.out
    assert purged.out.count("purge-poison") == len(poison)
    assert not poison & set(scene.dlq_letters())


def test_a_failed_job_with_no_message_is_redriven_by_jobs_redrive_and_then_succeeds(scene: Scene) -> None:
    # Given a job whose three model calls are rate limited: the worker ends it
    # Failed/retries_exhausted itself, so no message of it is left on any queue
    since = truncate_to_millis(datetime.now(UTC)) - timedelta(seconds=1)
    token = scene.stack.token("oncall-e2e", "oncall")
    job_id = rate_limited_thrice(scene.stack, token, "Redrive me without a message.", scene.texts)
    failed = scene.wait_job(job_id, JobStatus.FAILED)
    assert failed.error is not None
    assert failed.error.code == "retries_exhausted"
    assert scene.model_calls(job_id) == [429, 429, 429]
    assert scene.dlq_ids_of(job_id) == set()

    # When on-call looks for such jobs since just before it was submitted, dry run first
    dry = scene.cli(
        "jobs",
        "redrive",
        "--error-code",
        "retries_exhausted",
        "--since",
        to_iso(since),
        "--dry-run",
        "--json",
    )

    # Then the scan finds it (and says how many items it read) and plans its redrive to the jobs
    # queue, changing nothing
    assert dry.code == 0, dry.err
    plan = {step["jobId"]: step for step in dry.document["steps"]}
    assert (plan[job_id]["action"], plan[job_id]["sendsTo"]) == ("redrive", "jobs")
    assert dry.document["scan"]["itemsRead"] >= dry.document["scan"]["matched"] >= 1
    assert scene.job(job_id).status is JobStatus.FAILED

    # When redriven for real (by id: other jobs of the session stay as they are)
    run = scene.cli("jobs", "redrive", job_id)

    # Then it runs again and succeeds with one more model call: the fault counter, keyed by the
    # request's messages, is spent after three
    assert run.code == 0, run.out
    assert "sent to the jobs queue" in run.out
    job = scene.wait_job(job_id, JobStatus.SUCCEEDED)
    assert (job.attempts, job.redrive_count, job.error) == (1, 1, None)
    assert scene.model_calls(job_id) == [429, 429, 429, 200]
    inspected = scene.cli("jobs", "inspect", job_id, "--json").document
    assert (inspected["redriveCount"], inspected["result"]["present"]) == (1, True)
    assert (inspected["crashes"], inspected["isolated"]) == (0, False)
