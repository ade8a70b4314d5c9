"""The DynamoDB job repository against moto: claims, jobs, guarded transitions, the list, the rate."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from shared import resources as r
from shared.adapters.item_size import item_size
from shared.cursor import ListPosition
from shared.errors import IllegalTransitionError
from shared.ids import new_sequence_id
from shared.job import Caller, IdempotencyRecord, JobError, JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.ports import Lease, Transition, TransitionConflictError
from tests.support import jobs
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

SWEEP_AND_LEASE = {r.SWEEP_INDEX_PARTITION, r.SWEEP_INDEX_SORT, "leaseToken", "leaseExpiresAt"}


@pytest.fixture
def storage(resources: TestResources) -> Storage:
    return Storage(resources)


def _claim_record(
    job_id: str = "job-1", fingerprint: str = "f1", *, expires_in: timedelta
) -> IdempotencyRecord:
    now = jobs.now_millis()
    return IdempotencyRecord(
        scope_hash="scope-1",
        fingerprint=fingerprint,
        job_id=job_id,
        created_at=now,
        expires_at=now + expires_in,
        sequence_id=new_sequence_id(),
        model="gpt-4o-mini",
        prompt_version="summarize-v1",
        max_attempts=3,
        job_expires_at=now + timedelta(days=30),
    )


def _list_all(storage: Storage, owner: Caller, status: JobStatus | None, limit: int) -> list[str]:
    repository, now = storage.repository(), jobs.now_millis()
    seen: list[str] = []
    after: ListPosition | None = None
    for _ in range(100):
        page = repository.list_jobs(owner.owner_key, status, limit, after, now)
        assert len(page.items) <= limit
        seen.extend(item.job_id for item in page.items)
        if page.next_position is None:
            return seen
        after = page.next_position
    raise AssertionError("the list never ended")


# --- Idempotency claims ------------------------------------------------------------------------


def test_a_new_idempotency_key_is_claimed(storage: Storage) -> None:
    # Given a key nobody claimed
    record = _claim_record(expires_in=timedelta(hours=24))

    # When it is claimed
    existing = storage.repository().claim_idempotency_key(record, jobs.now_millis())

    # Then the claim is this one
    assert existing is None
    assert [item["jobId"]["S"] for item in storage.idempotency_items()] == ["job-1"]


def test_a_live_claim_is_returned_to_the_loser(storage: Storage) -> None:
    # Given a live claim on the key
    repository = storage.repository()
    first = _claim_record("job-1", "f1", expires_in=timedelta(hours=24))
    assert repository.claim_idempotency_key(first, jobs.now_millis()) is None

    # When another request claims the same key
    existing = repository.claim_idempotency_key(
        _claim_record("job-2", "f2", expires_in=timedelta(hours=24)), jobs.now_millis()
    )

    # Then it gets the winner's claim, unchanged
    assert existing == first
    assert [item["jobId"]["S"] for item in storage.idempotency_items()] == ["job-1"]


def test_an_expired_claim_is_overwritten(storage: Storage) -> None:
    # Given a claim whose expiry passed (TTL deletes late, so the item is still there)
    repository = storage.repository()
    assert (
        repository.claim_idempotency_key(
            _claim_record("job-old", expires_in=timedelta(seconds=-1)), jobs.now_millis()
        )
        is None
    )

    # When the key is claimed again
    existing = repository.claim_idempotency_key(
        _claim_record("job-new", expires_in=timedelta(hours=24)), jobs.now_millis()
    )

    # Then the new claim wins, as if the old one were gone
    assert existing is None
    assert [item["jobId"]["S"] for item in storage.idempotency_items()] == ["job-new"]


def test_a_live_claim_is_found_and_an_expired_or_missing_one_is_not(storage: Storage) -> None:
    repository = storage.repository()
    live = _claim_record("job-1", "f1", expires_in=timedelta(hours=24))
    assert repository.claim_idempotency_key(live, jobs.now_millis()) is None

    assert repository.find_idempotency_claim(live.scope_hash, jobs.now_millis()) == live
    assert repository.find_idempotency_claim(live.scope_hash, live.expires_at + timedelta(seconds=1)) is None
    assert repository.find_idempotency_claim("another-scope", jobs.now_millis()) is None


# --- Jobs ---------------------------------------------------------------------------------------


def test_a_job_is_created_once(storage: Storage) -> None:
    # Given a job record
    repository = storage.repository()
    job = jobs.new_job()

    # When it is created twice
    sweep_at = job.dispatch_at + jobs.DISPATCH_GRACE
    first, second = repository.create_job(job, sweep_at), repository.create_job(job, sweep_at)

    # Then only the first write created it
    assert (first, second) == (True, False)
    assert storage.job_ids() == [job.job_id]


def test_a_created_job_reads_back_equal(storage: Storage) -> None:
    # Given a job just created
    repository = storage.repository()
    job = jobs.new_job()
    jobs.create(repository, job)

    # When it is read (strongly consistent) right away
    read = repository.get_job(job.job_id)

    # Then it is the job as written; a missing id reads as None
    assert read == job
    assert repository.get_job("00000000-0000-4000-8000-000000000000") is None


def test_a_claim_transition_returns_the_job_as_written(storage: Storage) -> None:
    # Given a Pending job that is due
    repository = storage.repository()
    job = jobs.new_job()
    jobs.create(repository, job)

    # When the worker claims it
    running = jobs.claim(repository, job.job_id)

    # Then the answer is the whole new item: Running, leased, one attempt counted
    assert running.status is JobStatus.RUNNING
    assert running.attempts == 1
    assert running.lease_token is not None
    assert running.lease_expires_at is not None
    assert running == repository.get_job(job.job_id)


def test_a_multi_step_jobs_extra_usage_and_a_counted_result_read_back_as_written(storage: Storage) -> None:
    # Given a Running job
    repository = storage.repository()
    job = jobs.new_job()
    jobs.create(repository, job)
    running = jobs.claim(repository, job.job_id)
    assert running.lease_token is not None
    lease = Lease(token=running.lease_token, expires_at=jobs.now_millis() + timedelta(minutes=1))
    extra = Usage(input_tokens=30, output_tokens=5)

    # When a progress write sets its usage with the extra calls', then a Failed write counts a result
    progressed = repository.record_progress(
        job.job_id, lease, 2, Usage(input_tokens=90, output_tokens=19), extra
    )
    failed = repository.transition(
        Transition(
            job.job_id,
            JobStatus.RUNNING,
            JobStatus.FAILED,
            jobs.now_millis(),
            lease_token=lease.token,
            error=JobError(code="retries_exhausted", message="gave up"),
            usage_total=Usage(input_tokens=120, output_tokens=24),
            extra_usage=Usage(input_tokens=60, output_tokens=10),
            result_usage_counted=True,
        )
    )

    # Then each write returned the job as read back, with both kept
    assert (progressed.usage, progressed.extra_usage) == (Usage(input_tokens=90, output_tokens=19), extra)
    assert (failed.usage, failed.extra_usage) == (
        Usage(input_tokens=120, output_tokens=24),
        Usage(input_tokens=60, output_tokens=10),
    )
    assert failed.result_usage_counted is True
    assert repository.get_job(job.job_id) == failed


def test_a_transition_from_the_wrong_state_conflicts(storage: Storage) -> None:
    # Given a Pending job
    repository = storage.repository()
    job = jobs.new_job()
    jobs.create(repository, job)

    # When a writer believes it is Running
    with pytest.raises(TransitionConflictError) as conflict:
        repository.transition(
            Transition(job.job_id, JobStatus.RUNNING, JobStatus.SUCCEEDED, jobs.now_millis(), lease_token="x")
        )

    # Then nothing changed, and the conflict says how the job stands
    assert conflict.value.current == job
    assert repository.get_job(job.job_id) == job


def test_a_transition_under_another_lease_conflicts(storage: Storage) -> None:
    # Given a Running job held by a lease
    repository = storage.repository()
    job = jobs.new_job()
    jobs.create(repository, job)
    running = jobs.claim(repository, job.job_id)

    # When a worker holding another lease writes its result
    with pytest.raises(TransitionConflictError) as conflict:
        repository.transition(
            Transition(
                job.job_id, JobStatus.RUNNING, JobStatus.SUCCEEDED, jobs.now_millis(), lease_token="not-mine"
            )
        )

    # Then the job is untouched and still held by the first lease
    assert conflict.value.current == running
    assert repository.get_job(job.job_id) == running


def test_a_claim_before_the_job_is_due_conflicts(storage: Storage) -> None:
    # Given a Pending job dispatched for a minute from now (a backoff)
    repository = storage.repository()
    now = jobs.now_millis()
    job = jobs.new_job(created_at=now, dispatch_at=now + timedelta(minutes=1))
    jobs.create(repository, job)

    # When a worker tries to claim it now
    with pytest.raises(TransitionConflictError) as conflict:
        jobs.claim(repository, job.job_id, now)

    # Then the claim is refused
    assert conflict.value.current == job


def test_a_claim_at_max_attempts_conflicts(storage: Storage) -> None:
    # Given a Pending job that used all its attempts
    repository = storage.repository()
    job = jobs.new_job(attempts=3, max_attempts=3)
    jobs.create(repository, job)

    # When a worker tries to claim it
    with pytest.raises(TransitionConflictError) as conflict:
        jobs.claim(repository, job.job_id)

    # Then no fourth model call can start
    assert conflict.value.current is not None
    assert conflict.value.current.attempts == 3
    assert conflict.value.current.status is JobStatus.PENDING


def test_a_claim_is_one_request_granted_or_refused(storage: Storage) -> None:
    # Given a due Pending job and one that used all its attempts
    repository = storage.repository()
    due, exhausted = jobs.new_job(), jobs.new_job(attempts=3, max_attempts=3)
    jobs.create(repository, due)
    jobs.create(repository, exhausted)
    operations: list[str] = []

    def record(model: Any, **_: Any) -> None:
        operations.append(model.name)

    # When a worker claims both
    storage.dynamodb.meta.events.register("before-call.dynamodb", record)
    try:
        jobs.claim(repository, due.job_id)
        with pytest.raises(TransitionConflictError) as refused:
            jobs.claim(repository, exhausted.job_id)
    finally:
        storage.dynamodb.meta.events.unregister("before-call.dynamodb", record)

    # Then each claim was one UpdateItem with no read before it, and the refusal still says how
    # the job stands (ReturnValuesOnConditionCheckFailure), which is how the worker tells a
    # duplicate, an early and an exhausted delivery apart
    assert operations == ["UpdateItem", "UpdateItem"]
    assert refused.value.current == exhausted


def test_a_transition_of_a_missing_job_conflicts_without_creating_it(storage: Storage) -> None:
    # Given no job
    repository = storage.repository()

    # When a transition is written for an unknown id
    with pytest.raises(TransitionConflictError) as conflict:
        jobs.claim(repository, "00000000-0000-4000-8000-000000000000")

    # Then it conflicts with nothing, and no stub item appears
    assert conflict.value.current is None
    assert storage.scan(storage.resources.jobs_table) == []


def test_a_transition_the_lifecycle_lacks_is_refused_before_any_write(storage: Storage) -> None:
    # Given a Pending job
    repository = storage.repository()
    job = jobs.new_job()
    jobs.create(repository, job)

    # When a code path asks for Pending -> Succeeded
    with pytest.raises(IllegalTransitionError):
        repository.transition(
            Transition(job.job_id, JobStatus.PENDING, JobStatus.SUCCEEDED, jobs.now_millis())
        )

    # Then the job is untouched
    assert repository.get_job(job.job_id) == job


@pytest.mark.parametrize("terminal", ["succeeded", "failed", "canceled"])
def test_a_terminal_transition_leaves_the_sweeper_index_and_drops_the_lease(
    storage: Storage, terminal: str
) -> None:
    # Given a job the sweeper watches (Pending, or Running under a lease)
    repository, payloads = storage.repository(), storage.payloads()
    job = jobs.new_job()
    jobs.create(repository, job)
    before = storage.item(job.job_id, "JOB")
    assert before is not None
    assert {r.SWEEP_INDEX_PARTITION, r.SWEEP_INDEX_SORT} <= set(before)

    # When it reaches a terminal state
    if terminal == "canceled":
        now = jobs.now_millis()
        repository.transition(
            Transition(job.job_id, JobStatus.PENDING, JobStatus.CANCELED, now, cancel_requested_at=now)
        )
    else:
        running = jobs.claim(repository, job.job_id)
        assert set(storage.item(job.job_id, "JOB") or {}) >= SWEEP_AND_LEASE
        if terminal == "succeeded":
            jobs.succeed(repository, payloads, running, output="ok")
        else:
            jobs.fail(repository, running, JobError(code="content_policy", message="Refused by policy."))

    # Then the item carries no sweeper keys and no lease any more
    after = storage.item(job.job_id, "JOB")
    assert after is not None
    assert not SWEEP_AND_LEASE & set(after)
    stored = repository.get_job(job.job_id)
    assert stored is not None
    assert stored.lease_token is None
    assert stored.lease_expires_at is None


# --- The list -----------------------------------------------------------------------------------


def test_the_list_is_newest_first_with_same_millisecond_ties_in_sequence_order(storage: Storage) -> None:
    # Given jobs created in one millisecond (sequence ids in submission order), written out of order,
    # and two more created later
    repository = storage.repository()
    owner = jobs.sample_caller()
    instant = jobs.now_millis() - timedelta(seconds=10)
    same_ms = [jobs.new_job(owner, created_at=instant, sequence_id=new_sequence_id()) for _ in range(5)]
    later = [jobs.new_job(owner, created_at=instant + timedelta(milliseconds=n)) for n in (1, 2)]
    shuffled = same_ms + later
    random.Random(7).shuffle(shuffled)
    for job in shuffled:
        jobs.create(repository, job)

    # When the owner's jobs are listed
    page = repository.list_jobs(owner.owner_key, None, 100, None, jobs.now_millis())

    # Then they come newest first, ties broken by the later sequence id
    expected = [job.job_id for job in reversed(same_ms + later)]
    assert [item.job_id for item in page.items] == expected
    assert page.next_position is None


def test_the_list_filters_by_status_and_hides_expired_jobs(storage: Storage) -> None:
    # Given Pending, Canceled and expired jobs of one owner, and another owner's job
    repository = storage.repository()
    owner = jobs.sample_caller()
    now = jobs.now_millis()
    pending = jobs.new_job(owner)
    canceled = jobs.new_job(owner)
    expired = jobs.new_job(owner, created_at=now - timedelta(days=31), expires_at=now - timedelta(days=1))
    stranger = jobs.new_job(Caller(tenant="acme", sub="someone-else"))
    for job in (pending, canceled, expired, stranger):
        jobs.create(repository, job)
    repository.transition(Transition(canceled.job_id, JobStatus.PENDING, JobStatus.CANCELED, now))

    # When the owner lists everything, then only Canceled
    everything = repository.list_jobs(owner.owner_key, None, 100, None, jobs.now_millis())
    only_canceled = repository.list_jobs(owner.owner_key, JobStatus.CANCELED, 100, None, jobs.now_millis())

    # Then expired jobs and other owners' jobs never show, and the filter holds
    assert {item.job_id for item in everything.items} == {pending.job_id, canceled.job_id}
    assert [item.job_id for item in only_canceled.items] == [canceled.job_id]
    assert only_canceled.items[0].status is JobStatus.CANCELED


def test_pagination_over_the_list_index_reaches_every_job_once(storage: Storage) -> None:
    # Given seven jobs, one of them expired
    repository = storage.repository()
    owner = jobs.sample_caller()
    now = jobs.now_millis()
    live = [jobs.new_job(owner, created_at=now - timedelta(seconds=n)) for n in range(6)]
    expired = jobs.new_job(owner, created_at=now - timedelta(days=40), expires_at=now - timedelta(days=10))
    for job in [*live, expired]:
        jobs.create(repository, job)

    # When the list is read two items at a time, following next_position
    seen = _list_all(storage, owner, None, 2)

    # Then every live job appears exactly once, newest first
    assert seen == [job.job_id for job in live]


def test_pagination_with_a_status_filter_reaches_every_match_once(storage: Storage) -> None:
    # Given six jobs, every other one Canceled
    repository = storage.repository()
    owner = jobs.sample_caller()
    now = jobs.now_millis()
    created = [jobs.new_job(owner, created_at=now - timedelta(seconds=n)) for n in range(6)]
    for job in created:
        jobs.create(repository, job)
    canceled = created[::2]
    for job in canceled:
        repository.transition(Transition(job.job_id, JobStatus.PENDING, JobStatus.CANCELED, now))

    # When Canceled jobs are listed one page of two at a time (pages may come back short)
    seen = _list_all(storage, owner, JobStatus.CANCELED, 2)

    # Then each Canceled job appears once, in order
    assert seen == [job.job_id for job in canceled]


# --- The submit rate ----------------------------------------------------------------------------


def test_the_submit_quota_counts_per_owner_per_minute(storage: Storage) -> None:
    # Given a limit of two submits a minute
    repository = storage.repository()
    minute = jobs.now_millis().replace(second=0, microsecond=0)

    # When one owner submits three times in a minute, another once, and the first again next minute
    first_owner = [repository.take_submit_quota("acme#alice", minute, 2) for _ in range(3)]
    second_owner = repository.take_submit_quota("acme#bob", minute, 2)
    next_minute = repository.take_submit_quota("acme#alice", minute + timedelta(minutes=1), 2)

    # Then only the third submit in the window is refused
    assert first_owner == [True, True, False]
    assert second_owner is True
    assert next_minute is True


# --- Item size ----------------------------------------------------------------------------------


def _lifecycle_sizes(storage: Storage, job: JobRecord) -> dict[str, int]:
    """The stored size of the job item in each state that holds the most attributes."""
    repository = storage.repository()
    sizes: dict[str, int] = {}

    def measure(state: str) -> None:
        item = storage.item(job.job_id, "JOB")
        assert item is not None
        sizes[state] = item_size(item)

    jobs.create(repository, job)
    measure("Pending")
    running = jobs.claim(repository, job.job_id)
    measure("Running")
    now = jobs.now_millis()
    repository.transition(
        Transition(
            job.job_id, JobStatus.RUNNING, JobStatus.CANCELLATION_REQUESTED, now, cancel_requested_at=now
        )
    )
    measure("CancellationRequested")
    # The longest error the worker writes (functions/worker), with the largest usage it can report.
    error = JobError(
        code="provider_auth",
        message="The provider refused the service's credentials; operators have been alerted.",
    )
    repository.transition(
        Transition(
            job.job_id,
            JobStatus.CANCELLATION_REQUESTED,
            JobStatus.FAILED,
            jobs.now_millis(),
            lease_token=running.lease_token,
            error=error,
            usage=Usage(input_tokens=1_048_576, output_tokens=4096),
        )
    )
    measure("Failed")
    return sizes


def test_the_job_item_stays_under_1_kb_with_a_long_tenant_and_an_error(storage: Storage) -> None:
    # Given a Cognito caller (sub is a UUID) in a tenant with the longest name the API accepts
    owner = Caller(tenant="t" * 128, sub="3b7c1d2e-8f4a-4c6b-9d1e-2f3a4b5c6d7e")

    # When its job goes through the states that hold the most attributes
    sizes = _lifecycle_sizes(storage, jobs.new_job(owner))

    # Then every write is billed as one 1 KB unit
    assert max(sizes.values()) < 1024, sizes
