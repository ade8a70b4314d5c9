"""The fakes keep the port contracts (the DynamoDB adapter's conditions), and unit tests stay offline."""

from __future__ import annotations

import socket
import urllib.request
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import pytest

from shared.adapters.dynamo_items import sweep_shard
from shared.errors import IllegalTransitionError
from shared.job import IdempotencyRecord, JobError, JobInput, JobRecord, JobResult, Usage
from shared.lifecycle import JobStatus
from shared.ports import JobRepository, Lease, PayloadStore, Transition, TransitionConflictError
from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore, job_record

NOW = datetime(2030, 1, 15, 12, 0, 30, 250_000, tzinfo=UTC)
LEASE = Lease(token="lease-1", expires_at=NOW + timedelta(seconds=60))


def test_the_fakes_satisfy_the_ports() -> None:
    # mypy checks these assignments against the Protocols.
    repository: JobRepository = InMemoryJobRepository()
    payloads: PayloadStore = InMemoryPayloadStore()

    assert repository is not None
    assert payloads is not None


class TestNetworkIsBlocked:
    def test_create_connection(self) -> None:
        with pytest.raises(RuntimeError, match="must not open network connections"):
            socket.create_connection(("127.0.0.1", 9))

    def test_a_raw_socket(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as raw, pytest.raises(RuntimeError):
            raw.connect(("127.0.0.1", 9))

    def test_connect_ex(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as raw, pytest.raises(RuntimeError):
            raw.connect_ex(("127.0.0.1", 9))

    def test_an_http_client(self) -> None:
        with pytest.raises(RuntimeError):
            urllib.request.urlopen("http://127.0.0.1:9/", timeout=1)

    def test_unit_tests_carry_the_unit_marker(self, request: pytest.FixtureRequest) -> None:
        assert request.node.get_closest_marker("unit") is not None


class TestFakeClock:
    def test_is_timezone_aware_utc(self) -> None:
        assert FakeClock().now().tzinfo is UTC

    def test_moves_only_when_told(self) -> None:
        clock = FakeClock(NOW)

        assert clock.now() == clock.now() == NOW
        assert clock.advance(seconds=90) == NOW + timedelta(seconds=90)
        assert clock.advance(timedelta(hours=1), minutes=1) == NOW + timedelta(hours=1, minutes=2, seconds=30)

    def test_set_jumps_and_normalises_to_utc(self) -> None:
        clock = FakeClock(NOW)
        clock.set(datetime(2031, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))))

        assert clock.now() == datetime(2031, 1, 1, tzinfo=UTC)
        assert clock.now().tzinfo is UTC

    def test_refuses_naive_instants(self) -> None:
        with pytest.raises(ValueError, match="timezone-aware"):
            FakeClock(datetime(2030, 1, 1))  # noqa: DTZ001


def claim_record(
    scope: str = "scope", job_id: str = "job-1", expires_at: datetime = NOW
) -> IdempotencyRecord:
    return IdempotencyRecord(
        scope_hash=scope,
        fingerprint="f",
        job_id=job_id,
        created_at=expires_at - timedelta(hours=24),
        expires_at=expires_at,
        sequence_id="s",
        model="m",
        prompt_version="p",
        max_attempts=3,
        job_expires_at=expires_at + timedelta(days=29),
    )


class TestIdempotencyClaims:
    def test_the_first_claim_wins_and_later_ones_get_it(self) -> None:
        repository = InMemoryJobRepository()
        first = claim_record(job_id="first")

        assert repository.claim_idempotency_key(first, NOW - timedelta(hours=1)) is None
        assert (
            repository.claim_idempotency_key(claim_record(job_id="second"), NOW - timedelta(hours=1)) == first
        )
        assert repository.writes == ["claim_idempotency_key"]

    def test_a_claim_is_live_up_to_its_expiry_instant(self) -> None:
        repository = InMemoryJobRepository()
        first = claim_record(job_id="first")
        repository.claim_idempotency_key(first, NOW - timedelta(hours=1))

        assert repository.claim_idempotency_key(claim_record(job_id="second"), NOW) == first

    def test_an_expired_claim_is_overwritten(self) -> None:
        repository = InMemoryJobRepository()
        repository.claim_idempotency_key(claim_record(job_id="first"), NOW - timedelta(hours=1))
        second = claim_record(job_id="second", expires_at=NOW + timedelta(hours=24))

        assert repository.claim_idempotency_key(second, NOW + timedelta(milliseconds=1)) is None
        assert repository.claims["scope"] == second


class TestJobs:
    def test_create_only_if_absent(self) -> None:
        repository = InMemoryJobRepository()
        job = job_record(NOW)

        assert repository.create_job(job, NOW) is True
        assert repository.create_job(job.model_copy(update={"attempts": 2}), NOW) is False
        assert repository.get_job(job.job_id) == job
        assert repository.writes == ["create_job"]

    def test_a_missing_job_reads_as_none(self) -> None:
        assert InMemoryJobRepository().get_job("nope") is None


def running(repository: InMemoryJobRepository, **fields: object) -> JobRecord:
    job = job_record(NOW - timedelta(minutes=1), **fields)  # type: ignore[arg-type]
    repository.create_job(job, job.dispatch_at)
    return repository.transition(
        Transition(
            job_id=job.job_id,
            source=JobStatus.PENDING,
            target=JobStatus.RUNNING,
            now=NOW,
            new_lease=LEASE,
            count_attempt=True,
            require_due=True,
        )
    )


class TestTransition:
    def test_a_claim_counts_an_attempt_and_sets_the_lease(self) -> None:
        repository = InMemoryJobRepository()

        job = running(repository)

        assert (job.status, job.attempts, job.updated_at) == (JobStatus.RUNNING, 1, NOW)
        assert (job.lease_token, job.lease_expires_at) == (LEASE.token, LEASE.expires_at)
        assert repository.get_job(job.job_id) == job

    def test_an_illegal_edge_raises_before_anything_is_read_or_written(self) -> None:
        repository = InMemoryJobRepository()
        job = running(repository)
        writes = list(repository.writes)

        with pytest.raises(IllegalTransitionError):
            repository.transition(Transition(job.job_id, JobStatus.SUCCEEDED, JobStatus.RUNNING, NOW))

        assert repository.writes == writes

    def test_the_wrong_source_is_a_conflict_that_shows_the_current_job(self) -> None:
        repository = InMemoryJobRepository()
        job = running(repository)

        with pytest.raises(TransitionConflictError) as caught:
            repository.transition(Transition(job.job_id, JobStatus.PENDING, JobStatus.CANCELED, NOW))

        assert caught.value.current == job

    def test_a_missing_job_is_a_conflict_with_nothing_current(self) -> None:
        with pytest.raises(TransitionConflictError) as caught:
            InMemoryJobRepository().transition(Transition("nope", JobStatus.PENDING, JobStatus.RUNNING, NOW))

        assert caught.value.current is None

    def test_another_lease_token_is_a_conflict(self) -> None:
        repository = InMemoryJobRepository()
        job = running(repository)

        with pytest.raises(TransitionConflictError):
            repository.transition(
                Transition(job.job_id, JobStatus.RUNNING, JobStatus.SUCCEEDED, NOW, lease_token="stale")
            )

    def test_a_claim_before_the_dispatch_time_is_a_conflict(self) -> None:
        repository = InMemoryJobRepository()
        job = job_record(NOW, dispatch_at=NOW + timedelta(seconds=1))
        repository.create_job(job, job.dispatch_at)

        with pytest.raises(TransitionConflictError):
            repository.transition(
                Transition(job.job_id, JobStatus.PENDING, JobStatus.RUNNING, NOW, require_due=True)
            )

    def test_no_claim_beyond_max_attempts(self) -> None:
        repository = InMemoryJobRepository()
        job = job_record(NOW, attempts=3, max_attempts=3)
        repository.create_job(job, job.dispatch_at)

        with pytest.raises(TransitionConflictError):
            repository.transition(
                Transition(job.job_id, JobStatus.PENDING, JobStatus.RUNNING, NOW, count_attempt=True)
            )

    def test_the_lease_stays_through_cancellation_requested_and_goes_at_the_end(self) -> None:
        repository = InMemoryJobRepository()
        job = running(repository)

        requested = repository.transition(
            Transition(
                job.job_id, JobStatus.RUNNING, JobStatus.CANCELLATION_REQUESTED, NOW, cancel_requested_at=NOW
            )
        )
        canceled = repository.transition(
            Transition(
                job.job_id, JobStatus.CANCELLATION_REQUESTED, JobStatus.CANCELED, NOW, lease_token=LEASE.token
            )
        )

        assert (requested.lease_token, requested.cancel_requested_at) == (LEASE.token, NOW)
        assert (canceled.lease_token, canceled.lease_expires_at) == (None, None)

    def test_a_release_back_to_pending_sets_the_next_dispatch_and_sweep(self) -> None:
        repository = InMemoryJobRepository()
        job = running(repository)
        later = NOW + timedelta(seconds=30)

        released = repository.transition(
            Transition(
                job.job_id,
                JobStatus.RUNNING,
                JobStatus.PENDING,
                NOW,
                lease_token=LEASE.token,
                dispatch_at=later,
                sweep_at=later + timedelta(minutes=15),
            )
        )

        assert (released.dispatch_at, released.lease_token, released.attempts) == (later, None, 1)
        assert repository.sweep_at[job.job_id] == later + timedelta(minutes=15)

    def test_usage_adds_up_and_terminal_states_leave_the_sweep_index(self) -> None:
        repository = InMemoryJobRepository()
        job = running(repository, usage=Usage(input_tokens=10, output_tokens=2))

        done = repository.transition(
            Transition(
                job.job_id,
                JobStatus.RUNNING,
                JobStatus.SUCCEEDED,
                NOW,
                lease_token=LEASE.token,
                usage=Usage(input_tokens=5, output_tokens=7),
                result_location="item",
            )
        )

        assert done.usage == Usage(input_tokens=15, output_tokens=9)
        assert done.result_location == "item"
        assert job.job_id not in repository.sweep_at

    def test_an_operator_redrive_renews_the_attempts(self) -> None:
        repository = InMemoryJobRepository()
        job = job_record(
            NOW,
            status=JobStatus.FAILED,
            attempts=3,
            error=JobError(code="retries_exhausted", message="x"),
            result_location="item",
        )
        repository.create_job(job, NOW)

        redriven = repository.transition(
            Transition(
                job.job_id,
                JobStatus.FAILED,
                JobStatus.PENDING,
                NOW,
                renew_attempts=True,
                operator_redrive=True,
                dispatch_at=NOW,
                sweep_at=NOW,
            )
        )

        assert (redriven.status, redriven.attempts, redriven.redrive_count) == (JobStatus.PENDING, 0, 1)
        assert (redriven.error, redriven.result_location) == (None, None)


class TestLeaseAndDispatch:
    def test_a_heartbeat_moves_only_the_lease_expiry(self) -> None:
        repository = InMemoryJobRepository()
        job = running(repository)
        later = Lease(token=LEASE.token, expires_at=LEASE.expires_at + timedelta(seconds=20))

        beat = repository.heartbeat(job.job_id, later)

        assert beat == job.model_copy(
            update={"lease_expires_at": later.expires_at, "revision": job.revision + 1}
        )
        assert repository.write_kinds[job.job_id] == "heartbeat"

    def test_a_heartbeat_with_a_lost_lease_is_a_conflict(self) -> None:
        repository = InMemoryJobRepository()
        job = running(repository)

        with pytest.raises(TransitionConflictError):
            repository.heartbeat(job.job_id, Lease(token="stale", expires_at=NOW))

    def test_a_dispatch_bump_happens_once_per_read(self) -> None:
        repository = InMemoryJobRepository()
        job = job_record(NOW - timedelta(minutes=20))
        repository.create_job(job, job.dispatch_at)

        bumped = repository.bump_dispatch(job, NOW, NOW + timedelta(minutes=15))

        assert (bumped.dispatch_at, bumped.updated_at) == (NOW, NOW)
        with pytest.raises(TransitionConflictError):
            repository.bump_dispatch(job, NOW, NOW + timedelta(minutes=15))

    def test_sweep_candidates_are_due_watched_jobs_of_one_shard_oldest_first(self) -> None:
        # Given jobs due one minute apart, and a terminal one that left the index
        repository = InMemoryJobRepository()
        jobs = [job_record(NOW - timedelta(minutes=n)) for n in range(64)]
        for job in jobs:
            repository.create_job(job, job.dispatch_at)
        shard = Counter(sweep_shard(job.job_id) for job in jobs).most_common(1)[0][0]
        in_shard = [job for job in jobs if sweep_shard(job.job_id) == shard]
        newest, ended = in_shard[0], in_shard[1]
        repository.transition(Transition(ended.job_id, JobStatus.PENDING, JobStatus.CANCELED, NOW))

        # When
        due = repository.sweep_candidates(shard, newest.dispatch_at - timedelta(seconds=1), limit=100)

        # Then
        assert due == [job.job_id for job in reversed(in_shard[2:])]
        assert repository.sweep_candidates(shard, NOW, limit=1) == due[:1]

    def test_deferring_the_sweep_needs_the_job_unchanged(self) -> None:
        repository = InMemoryJobRepository()
        job = running(repository)
        later = NOW + timedelta(minutes=5)

        repository.defer_sweep(job, later)

        assert repository.sweep_at[job.job_id] == later
        with pytest.raises(TransitionConflictError):
            repository.defer_sweep(job.model_copy(update={"lease_token": "stale"}), later)


class TestListAndQuota:
    def test_a_read_that_stops_at_the_limit_names_a_next_position(self) -> None:
        repository = InMemoryJobRepository()
        for n in range(2):
            job = job_record(NOW + timedelta(seconds=n))
            repository.create_job(job, NOW)

        full = repository.list_jobs("user:alice#alice", None, 2, None, NOW)
        short = repository.list_jobs("user:alice#alice", None, 3, None, NOW)

        assert len(full.items) == 2
        assert full.next_position is not None
        assert short.next_position is None

    def test_filters_apply_after_the_read(self) -> None:
        repository = InMemoryJobRepository()
        for n, status in enumerate([JobStatus.PENDING, JobStatus.FAILED, JobStatus.PENDING]):
            repository.create_job(job_record(NOW + timedelta(seconds=n), status=status), NOW)

        page = repository.list_jobs("user:alice#alice", JobStatus.FAILED, 1, None, NOW)

        assert page.items == []
        assert page.next_position is not None

    def test_the_list_filters_by_status_after_reading_its_page(self) -> None:
        # The adapter reads `limit` index entries, then the jobs, then filters by status: a page
        # can be short while more follow
        repository = InMemoryJobRepository()
        done = job_record(NOW, status=JobStatus.SUCCEEDED)
        pending = job_record(NOW + timedelta(milliseconds=1))
        for job in (done, pending):
            repository.create_job(job, NOW)

        page = repository.list_jobs("user:alice#alice", JobStatus.SUCCEEDED, 1, None, NOW)

        assert page.items == []
        assert page.next_position is not None
        assert repository.list_jobs("user:alice#alice", JobStatus.SUCCEEDED, 2, None, NOW).items == [done]

    def test_the_submit_quota_is_per_owner_and_window(self) -> None:
        repository = InMemoryJobRepository()
        minute = NOW.replace(second=0, microsecond=0)

        assert [repository.take_submit_quota("a", minute, 2) for _ in range(3)] == [True, True, False]
        assert repository.take_submit_quota("b", minute, 2) is True
        assert repository.take_submit_quota("a", minute + timedelta(minutes=1), 2) is True


class TestPayloadStore:
    def test_a_payload_is_found_only_where_it_was_put(self) -> None:
        payloads = InMemoryPayloadStore()
        payloads.put_input(JobInput(job_id="j", text="t"), "s3", NOW)
        payloads.put_result(JobResult(job_id="j", output="o"), "item", NOW)

        assert payloads.get_input("j", "s3") == JobInput(job_id="j", text="t")
        assert payloads.get_input("j", "item") is None
        assert payloads.get_result("j", "item") == JobResult(job_id="j", output="o")
        assert payloads.get_result("j", "s3") is None

    def test_expiring_an_input_never_creates_one(self) -> None:
        payloads = InMemoryPayloadStore()
        payloads.set_input_expiry("missing", "item", NOW)
        payloads.put_input(JobInput(job_id="j", text="t"), "item", NOW + timedelta(days=30))
        payloads.set_input_expiry("j", "item", NOW + timedelta(days=1))

        assert payloads.get_input("missing", "item") is None
        assert payloads.expires_at[("input", "j", "item")] == NOW + timedelta(days=1)
        assert payloads.writes == ["put_input", "set_input_expiry"]
