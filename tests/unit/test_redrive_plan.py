"""The DLQ redrive plan: a pure decision per message, from the message and its job alone."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from outlast.operator.plan import (
    DISPATCHING,
    DROPPING,
    JOB_ERROR_CODES,
    KEEPING,
    REDRIVABLE_ERROR_CODES,
    TERMINAL_ERROR_CODES,
    Action,
    DeadLetter,
    DispatchBump,
    Joined,
    PlanOptions,
    Selection,
    Step,
    decide,
    plan,
    write_for,
)
from shared.job import JobError, JobRecord
from shared.job_errors import ERROR_MESSAGES
from shared.lifecycle import JobStatus
from shared.ports import Transition
from tests.support.jobs import new_job

NOW = datetime(2026, 3, 1, 3, 0, 0, tzinfo=UTC)
GRACE = timedelta(minutes=15)
DEFAULTS = PlanOptions()


def job(status: JobStatus = JobStatus.PENDING, **changes: Any) -> JobRecord:
    """A job created ten minutes before NOW, then moved to `status` with `changes`."""
    created = NOW - timedelta(minutes=10)
    return new_job(created_at=created, dispatch_at=created).model_copy(update={"status": status, **changes})


def failed(code: str, **changes: Any) -> JobRecord:
    return job(
        JobStatus.FAILED, attempts=3, error=JobError(code=code, message=ERROR_MESSAGES[code]), **changes
    )


def running(lease_expires_at: datetime, attempts: int = 1, **changes: Any) -> JobRecord:
    return job(
        JobStatus.RUNNING,
        attempts=attempts,
        stalls=attempts,
        lease_token="a" * 32,
        lease_expires_at=lease_expires_at,
        **changes,
    )


_sequence = iter(range(1_000_000))


def letter(
    about: JobRecord | None = None,
    *,
    body: str | None = None,
    reason: str | None = None,
    sent_at: datetime | None = None,
) -> DeadLetter:
    """A DLQ message for the job (or with the given body)."""
    number = next(_sequence)
    text = body if body is not None else json.dumps({"jobId": about.job_id if about else "", "traceId": "t"})
    message: dict[str, Any] = {
        "MessageId": f"message-{number:04d}",
        "ReceiptHandle": f"handle-{number}",
        "Body": text,
        "Attributes": {
            "ApproximateReceiveCount": "7",
            "SentTimestamp": str(int((sent_at or NOW - timedelta(minutes=5)).timestamp() * 1000)),
        },
    }
    if reason is not None:
        message["MessageAttributes"] = {"reason": {"DataType": "String", "StringValue": reason}}
    return DeadLetter.from_sqs(message)


def joined(about: JobRecord | None, **kwargs: Any) -> Joined:
    return Joined(letter(about, **kwargs), about)


def action_of(about: JobRecord | None, options: PlanOptions = DEFAULTS) -> Action:
    return decide(joined(about), NOW, options).action


# --- one message, one job --------------------------------------------------------------------


def test_a_succeeded_or_canceled_job_is_never_re_run_its_message_is_dropped() -> None:
    assert action_of(job(JobStatus.SUCCEEDED)) is Action.DROP_SUCCEEDED
    assert action_of(job(JobStatus.CANCELED)) is Action.DROP_CANCELED
    assert (
        action_of(job(JobStatus.SUCCEEDED), PlanOptions(force=True, purge_poison=True))
        is Action.DROP_SUCCEEDED
    )


def test_a_job_that_ran_out_of_attempts_is_redriven_without_force() -> None:
    assert {"retries_exhausted"} == REDRIVABLE_ERROR_CODES
    assert action_of(failed("retries_exhausted")) is Action.REDRIVE


@pytest.mark.parametrize("code", sorted(TERMINAL_ERROR_CODES | {"input_missing", "worker_crashed"}))
def test_a_terminal_failure_needs_force_and_force_redrives_it(code: str) -> None:
    # Given a job Failed for a reason a re-run does not fix by itself
    failure = failed(code)

    # Then it is kept without --force, redriven with it, and the plan says why
    kept = decide(joined(failure), NOW, DEFAULTS)
    assert kept.action is Action.NEEDS_FORCE
    assert code in kept.why
    assert "--force" in kept.why
    forced = decide(joined(failure), NOW, PlanOptions(force=True))
    assert forced.action is Action.REDRIVE
    assert "forced" in forced.why


def test_the_redrive_write_is_the_operator_redrive_of_the_lifecycle() -> None:
    # Given a Failed job's redrive step
    failure = failed("retries_exhausted", redrive_count=1)
    [step] = plan([joined(failure)], NOW, DEFAULTS)
    later = NOW + timedelta(seconds=3)

    # When the write is built at execution time
    write = write_for(step, later, GRACE)

    # Then it is Failed -> Pending with redriveCount + 1 and attempts renewed, due now, swept after the grace
    assert write == Transition(
        job_id=failure.job_id,
        source=JobStatus.FAILED,
        target=JobStatus.PENDING,
        now=later,
        operator_redrive=True,
        renew_attempts=True,
        dispatch_at=later,
        sweep_at=later + GRACE,
    )
    assert "redriveCount 1 -> 2" in step.why


def test_a_running_job_under_a_live_lease_is_left_to_its_worker() -> None:
    decision = decide(joined(running(NOW + timedelta(seconds=30))), NOW, DEFAULTS)
    assert decision.action is Action.SKIP
    assert "lease" in decision.why


def test_a_stuck_running_job_is_recovered_under_its_expired_lease() -> None:
    # Given a job whose worker died (its lease ran out) with attempts left
    stuck = running(NOW - timedelta(seconds=1), attempts=1)
    [step] = plan([joined(stuck)], NOW, DEFAULTS)
    assert step.action is Action.RECOVER

    # Then the write is Running -> Pending guarded by that lease, attempts kept
    write = write_for(step, NOW, GRACE)
    assert isinstance(write, Transition)
    assert (write.source, write.target, write.lease_token) == (JobStatus.RUNNING, JobStatus.PENDING, "a" * 32)
    # ... and by that lease still being expired when the write lands: a late heartbeat keeps the
    # token but renews the lease, and the job is then its worker's again
    assert write.require_lease_expired
    assert not write.renew_attempts
    assert not write.operator_redrive
    assert (write.dispatch_at, write.sweep_at) == (NOW, NOW + GRACE)


def test_a_stuck_running_job_out_of_attempts_gets_them_renewed() -> None:
    # Given a job whose worker died under a claim it had alone, with no retries left
    stuck = running(NOW - timedelta(seconds=1), attempts=3, solo=True)
    [step] = plan([joined(stuck)], NOW, DEFAULTS)
    write = write_for(step, NOW, GRACE)
    assert isinstance(write, Transition)
    assert write.renew_attempts
    assert "redriveCount 0 -> 1" in step.why


def test_a_stuck_pending_job_is_dispatched_again_without_touching_its_attempts() -> None:
    stuck = job(JobStatus.PENDING, attempts=1, stalls=1)
    [step] = plan([joined(stuck)], NOW, DEFAULTS)
    assert step.action is Action.REDISPATCH
    assert write_for(step, NOW, GRACE) == DispatchBump(job=stuck, now=NOW, sweep_at=NOW + GRACE)


def test_a_pending_job_backing_off_or_out_of_attempts_is_skipped_with_the_reason() -> None:
    backing_off = job(JobStatus.PENDING, attempts=1, stalls=1, dispatch_at=NOW + timedelta(seconds=20))
    exhausted = job(JobStatus.PENDING, attempts=3, stalls=3)
    assert decide(joined(backing_off), NOW, DEFAULTS).action is Action.SKIP
    assert "backing off" in decide(joined(backing_off), NOW, DEFAULTS).why
    assert decide(joined(exhausted), NOW, DEFAULTS).action is Action.SKIP
    assert "retries_exhausted" in decide(joined(exhausted), NOW, DEFAULTS).why


def test_a_job_being_canceled_is_not_re_run() -> None:
    canceling = job(
        JobStatus.CANCELLATION_REQUESTED,
        attempts=1,
        cancel_requested_at=NOW - timedelta(seconds=5),
        lease_token="b" * 32,
        lease_expires_at=NOW - timedelta(seconds=1),
    )
    assert action_of(canceling) is Action.SKIP


@pytest.mark.parametrize(
    ("body", "reason"),
    [("not a job message {", "unparseable"), (None, "unknown_job")],
)
def test_poison_is_kept_and_listed_and_only_purged_when_asked(body: str | None, reason: str) -> None:
    # Given a message with no job behind it (parked by the worker with its reason)
    ghost = new_job()  # never stored: the message names a job that does not exist
    poison = Joined(letter(ghost, body=body, reason=reason), None)

    # Then it is a purge candidate, and purged only with --purge-poison: never redriven
    assert decide(poison, NOW, DEFAULTS).action is Action.POISON_PURGE_CANDIDATE
    assert decide(poison, NOW, PlanOptions(force=True)).action is Action.POISON_PURGE_CANDIDATE
    assert decide(poison, NOW, PlanOptions(purge_poison=True)).action is Action.PURGE_POISON
    assert poison.letter.source == f"worker: {reason}"


def test_an_expired_job_counts_as_gone() -> None:
    expired = failed("retries_exhausted", expires_at=NOW - timedelta(seconds=1))
    assert action_of(expired) is Action.POISON_PURGE_CANDIDATE
    assert action_of(expired, PlanOptions(purge_poison=True)) is Action.PURGE_POISON


def test_a_job_record_that_cannot_be_read_is_left_alone() -> None:
    unreadable = Joined(letter(new_job()), None, unreadable="ValueError while reading it")
    decision = decide(unreadable, NOW, PlanOptions(force=True, purge_poison=True))
    assert decision.action is Action.SKIP
    assert "ValueError" in decision.why


def test_an_old_failure_warns_that_its_input_may_be_gone() -> None:
    old = failed("retries_exhausted", updated_at=NOW - timedelta(hours=30))
    fresh = failed("retries_exhausted", updated_at=NOW - timedelta(hours=1))
    [old_step, fresh_step] = plan([joined(old), joined(fresh)], NOW, DEFAULTS)
    assert any("input_missing" in w for w in old_step.warnings)
    assert fresh_step.warnings == ()


def test_steps_that_make_no_write_refuse_to_build_one() -> None:
    [step] = plan([joined(job(JobStatus.SUCCEEDED))], NOW, DEFAULTS)
    with pytest.raises(ValueError, match="no write"):
        write_for(step, NOW, GRACE)


# --- the whole plan ----------------------------------------------------------------------------


def test_every_action_either_dispatches_drops_or_keeps() -> None:
    assert set(Action) == DISPATCHING | DROPPING | KEEPING
    assert not DISPATCHING & DROPPING
    assert not DISPATCHING & KEEPING
    assert not DROPPING & KEEPING


def test_the_oldest_message_of_a_job_carries_its_redrive_and_the_others_ride_on_it() -> None:
    # Given three DLQ messages for one Failed job, received in any order
    failure = failed("retries_exhausted")
    first = Joined(letter(failure, sent_at=NOW - timedelta(hours=2)), failure)
    second = Joined(letter(failure, sent_at=NOW - timedelta(hours=1)), failure)
    third = Joined(letter(failure, sent_at=NOW - timedelta(minutes=1)), failure)
    received = [third, first, second]
    random.Random(7).shuffle(received)

    # When the plan is made
    steps = plan(received, NOW, DEFAULTS)

    # Then exactly one message redrives the job; the others are dropped once it went through
    by_message = {s.letter.message_id: s for s in steps}
    assert [s.letter.message_id for s in steps] == [m.letter.message_id for m in (first, second, third)]
    assert by_message[first.letter.message_id].action is Action.REDRIVE
    for duplicate in (second, third):
        step = by_message[duplicate.letter.message_id]
        assert (step.action, step.primary) == (Action.DROP_DUPLICATE, first.letter.message_id)


def test_duplicates_of_a_finished_job_are_each_simply_dropped() -> None:
    done = job(JobStatus.SUCCEEDED)
    steps = plan([joined(done), joined(done)], NOW, DEFAULTS)
    assert [s.action for s in steps] == [Action.DROP_SUCCEEDED, Action.DROP_SUCCEEDED]
    assert all(s.primary is None for s in steps)


def test_the_plan_is_a_pure_function_of_its_inputs() -> None:
    items = [
        joined(failed("retries_exhausted")),
        joined(failed("content_policy")),
        joined(job(JobStatus.SUCCEEDED)),
        Joined(letter(body="garbage", reason="unparseable"), None),
    ]
    first = plan(items, NOW, DEFAULTS)
    again = plan(list(reversed(items)), NOW, DEFAULTS)
    assert [(s.letter.message_id, s.action, s.why) for s in first] == [
        (s.letter.message_id, s.action, s.why) for s in again
    ]


def _selected(selection: Selection, items: list[Joined]) -> list[Step]:
    return plan([i for i in items if selection.selects(i, NOW)], NOW, DEFAULTS)


def test_selection_by_job_message_error_code_all_and_poison() -> None:
    # Given one message of each kind
    exhausted, policy, done = failed("retries_exhausted"), failed("content_policy"), job(JobStatus.SUCCEEDED)
    items = [joined(exhausted), joined(policy), joined(done), Joined(letter(body="junk"), None)]
    ids = [i.letter.message_id for i in items]

    def chosen(selection: Selection) -> list[str]:
        return [s.letter.message_id for s in _selected(selection, items)]

    # Then each selector picks exactly its messages, and they add up
    assert chosen(Selection(job_ids=frozenset({policy.job_id}))) == [ids[1]]
    assert chosen(Selection(message_ids=frozenset({ids[2]}))) == [ids[2]]
    assert chosen(Selection(error_codes=frozenset({"retries_exhausted"}))) == [ids[0]]
    assert chosen(Selection(poison=True)) == [ids[3]]
    # ... except --purge-poison, which selects every poison message only when it stands alone:
    # beside another selector it only lets the run purge the poison that selector picked
    assert chosen(Selection(job_ids=frozenset({done.job_id}), poison=True)) == [ids[2]]
    assert chosen(Selection(message_ids=frozenset({ids[3]}), poison=True)) == [ids[3]]
    assert chosen(Selection(error_codes=frozenset({"content_policy"}), poison=True)) == [ids[1]]
    assert sorted(chosen(Selection(everything=True))) == sorted(ids)
    assert Selection().empty
    assert not Selection(poison=True).empty


# --- reading a DLQ message ---------------------------------------------------------------------


def test_a_dlq_message_is_read_with_its_job_reason_count_and_age() -> None:
    ghost = new_job()
    sent = datetime(2026, 3, 1, 2, 0, 0, 123000, tzinfo=UTC)
    message = letter(ghost, reason="unknown_job", sent_at=sent)
    assert (message.job_id, message.trace_id, message.reason) == (ghost.job_id, "t", "unknown_job")
    assert (message.receive_count, message.sent_at) == (7, sent)
    garbage = letter(body="{not json")
    assert (garbage.job_id, garbage.trace_id, garbage.reason) == (None, None, None)
    assert garbage.source == "redrive policy"


def test_the_error_codes_are_the_workers_error_codes() -> None:
    assert set(ERROR_MESSAGES) == JOB_ERROR_CODES
    assert {
        "content_policy",
        "context_length_exceeded",
        "invalid_input",
        "provider_auth",
        "invalid_output",
        "output_truncated",
    } == TERMINAL_ERROR_CODES
