"""The read, result, cancel and list use cases: every one authorized against the stored owner."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from functions.status.dependencies import StatusDependencies
from functions.status.service import cancel_job, get_job, get_output, get_result, list_jobs
from functions.status.settings import StatusSettings
from functions.submit.dependencies import SubmitDependencies
from functions.submit.service import submit_job
from functions.submit.settings import SubmitSettings
from shared import resources as r
from shared.contract import JobPage, SubmitRequest
from shared.cursor import CursorCodec
from shared.errors import (
    InvalidCursorError,
    JobNotCancelableError,
    JobNotFoundError,
    JobNotSucceededError,
    StorageUnavailableError,
)
from shared.job import Caller, JobError, JobInput, JobRecord, JobResult, Usage
from shared.lifecycle import JobStatus
from shared.output import START, OutputCursor, OutputEvent
from shared.ports import Lease, Transition, TransitionConflictError
from tests.budget_fakes import InMemoryBudgetLedger
from tests.document_fakes import InMemoryDocumentObjects, InMemoryDocumentRepository
from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore, job_record
from tests.output_fakes import InMemoryOutputEventStore

ALICE = Caller(tenant="acme", sub="alice")
BOB = Caller(tenant="acme", sub="bob")
ALICE_ELSEWHERE = Caller(tenant="globex", sub="alice")
SECRET = b"cursor-secret-of-32-bytes-length"
LEASE_TOKEN = "lease-1"


def status_settings() -> StatusSettings:
    return StatusSettings.model_validate(
        {
            r.ENV_JOBS_TABLE: "jobs",
            r.ENV_IDEMPOTENCY_TABLE: "idempotency",
            r.ENV_PAYLOAD_BUCKET: "payloads",
            r.ENV_CURSOR_SECRET: "arn:aws:secretsmanager:us-east-1:123456789012:secret:cursor",
            r.ENV_BUDGETS_TABLE: "budgets",
            r.ENV_DOCUMENTS_TABLE: "documents",
            r.ENV_DOCUMENTS_BUCKET: "documents",
            r.ENV_OUTPUT_EVENTS_TABLE: "output-events",
        }
    )


def deps_with(
    repository: InMemoryJobRepository, payloads: InMemoryPayloadStore, clock: FakeClock
) -> StatusDependencies:
    return StatusDependencies(
        settings=status_settings(),
        repository=repository,
        payloads=payloads,
        clock=clock,
        cursor_codec=lambda: CursorCodec(SECRET),
        budgets=InMemoryBudgetLedger(),
        events=InMemoryOutputEventStore(),
    )


@pytest.fixture
def deps(
    repository: InMemoryJobRepository, payloads: InMemoryPayloadStore, clock: FakeClock
) -> StatusDependencies:
    return deps_with(repository, payloads, clock)


def stored(
    repository: InMemoryJobRepository, clock: FakeClock, caller: Caller = ALICE, **fields: Any
) -> JobRecord:
    """A job of `caller`, created now (or at `created_at`) and written to the repository."""
    created_at = fields.pop("created_at", clock.now() - timedelta(seconds=5))
    assert isinstance(created_at, datetime)
    job = job_record(created_at, tenant=caller.tenant, owner=caller.sub, **fields)
    repository.create_job(job, job.dispatch_at)
    return job


def claim(repository: InMemoryJobRepository, job: JobRecord, now: datetime) -> JobRecord:
    """What a worker's claim writes: Pending -> Running under a fresh lease, one attempt more."""
    return repository.transition(
        Transition(
            job_id=job.job_id,
            source=JobStatus.PENDING,
            target=JobStatus.RUNNING,
            now=now,
            new_lease=Lease(token=LEASE_TOKEN, expires_at=now + timedelta(seconds=60)),
            count_attempt=True,
            require_due=True,
        )
    )


class TestGetJob:
    def test_the_owner_gets_the_job(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        job = stored(repository, clock)

        assert get_job(deps, ALICE, job.job_id) == job

    @pytest.mark.parametrize(
        "caller",
        [BOB, ALICE_ELSEWHERE, Caller(tenant="user:alice", sub="alice")],
        ids=["other sub", "same sub other tenant", "same sub personal tenant"],
    )
    def test_anyone_else_gets_not_found(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock, caller: Caller
    ) -> None:
        job = stored(repository, clock)

        with pytest.raises(JobNotFoundError):
            get_job(deps, caller, job.job_id)

    def test_a_missing_job_is_not_found(self, deps: StatusDependencies) -> None:
        with pytest.raises(JobNotFoundError):
            get_job(deps, ALICE, "6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b")

    @pytest.mark.parametrize("past_expiry", [timedelta(0), timedelta(milliseconds=1), timedelta(days=3)])
    def test_an_expired_job_is_not_found_even_before_ttl_deletes_it(
        self,
        deps: StatusDependencies,
        repository: InMemoryJobRepository,
        clock: FakeClock,
        past_expiry: timedelta,
    ) -> None:
        job = stored(repository, clock)
        clock.set(job.expires_at + past_expiry)

        with pytest.raises(JobNotFoundError):
            get_job(deps, ALICE, job.job_id)

    def test_a_job_is_visible_until_its_last_millisecond(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        job = stored(repository, clock)
        clock.set(job.expires_at - timedelta(milliseconds=1))

        assert get_job(deps, ALICE, job.job_id).job_id == job.job_id

    def test_not_found_says_the_same_whatever_the_reason(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        job = stored(repository, clock)
        details = set()
        for caller, job_id in [(BOB, job.job_id), (ALICE, "6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b")]:
            with pytest.raises(JobNotFoundError) as caught:
                get_job(deps, caller, job_id)
            details.add(caught.value.detail)

        assert len(details) == 1


class TestGetResult:
    def test_a_succeeded_job_has_its_output_and_usage(
        self,
        deps: StatusDependencies,
        repository: InMemoryJobRepository,
        payloads: InMemoryPayloadStore,
        clock: FakeClock,
    ) -> None:
        job = stored(
            repository,
            clock,
            status=JobStatus.SUCCEEDED,
            result_location="item",
            usage=Usage(input_tokens=120, output_tokens=30),
        )
        payloads.put_result(JobResult(job_id=job.job_id, output="A summary."), "item", job.expires_at)

        result = get_result(deps, ALICE, job.job_id)

        assert result.to_wire() == {
            "jobId": job.job_id,
            "operation": "summarize",
            "output": "A summary.",
            "outputFormat": "text",
            "usage": {
                "inputTokens": 120,
                "outputTokens": 30,
                "estimated": False,
                "cachedInputTokens": 0,
                "tiers": [],
            },
        }

    @pytest.mark.parametrize(
        "status", [s for s in JobStatus if s is not JobStatus.SUCCEEDED], ids=lambda s: s.value
    )
    def test_a_job_that_has_not_succeeded_has_no_result(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock, status: JobStatus
    ) -> None:
        job = stored(repository, clock, status=status)

        with pytest.raises(JobNotSucceededError):
            get_result(deps, ALICE, job.job_id)

    def test_someone_elses_result_is_not_found(
        self,
        deps: StatusDependencies,
        repository: InMemoryJobRepository,
        payloads: InMemoryPayloadStore,
        clock: FakeClock,
    ) -> None:
        job = stored(repository, clock, status=JobStatus.SUCCEEDED, result_location="s3")
        payloads.put_result(JobResult(job_id=job.job_id, output="secret"), "s3", job.expires_at)

        with pytest.raises(JobNotFoundError):
            get_result(deps, BOB, job.job_id)

    def test_a_result_that_cannot_be_read_is_a_retryable_error(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        job = stored(repository, clock, status=JobStatus.SUCCEEDED, result_location="s3")

        with pytest.raises(StorageUnavailableError):
            get_result(deps, ALICE, job.job_id)


class TestGetOutput:
    @staticmethod
    def events(
        deps: StatusDependencies, job: JobRecord, attempt: int, texts: list[str], clock: FakeClock
    ) -> None:
        for seq, text in enumerate(texts, start=1):
            deps.events.put_event(
                OutputEvent(job_id=job.job_id, attempt=attempt, seq=seq, text=text),
                clock.now() + timedelta(hours=24),
            )

    def test_the_owner_reads_the_events_in_order_with_a_cursor_to_go_on(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        # Given a running streaming job with three events written
        job = stored(repository, clock, stream=True, status=JobStatus.RUNNING)
        self.events(deps, job, 1, ["Once ", "upon ", "a time"], clock)

        # When the owner reads two, then the rest
        first = get_output(deps, ALICE, job.job_id, START, limit=2)
        rest = get_output(deps, ALICE, job.job_id, OutputCursor.parse(first.next_cursor or ""), limit=2)

        # Then
        assert [e.text for e in first.events] == ["Once ", "upon "]
        assert first.next_cursor == "1.2"
        assert first.complete is False
        assert [e.text for e in rest.events] == ["a time"]
        assert rest.next_cursor == "1.3"
        assert rest.complete is False  # still running: more may come

    def test_an_ended_job_s_last_page_is_complete_and_names_the_result_attempt(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        job = stored(repository, clock, stream=True, status=JobStatus.SUCCEEDED, result_attempt=2)
        self.events(deps, job, 1, ["cut"], clock)
        self.events(deps, job, 2, ["whole ", "text"], clock)

        page = get_output(deps, ALICE, job.job_id, START, limit=100)

        assert [(e.attempt, e.seq) for e in page.events] == [(1, 1), (2, 1), (2, 2)]
        assert page.complete is True
        assert page.next_cursor is None
        assert page.result_attempt == 2

    def test_a_full_page_of_an_ended_job_is_not_complete_while_more_are_left(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        job = stored(repository, clock, stream=True, status=JobStatus.CANCELED)
        self.events(deps, job, 1, ["a", "b"], clock)

        assert get_output(deps, ALICE, job.job_id, START, limit=1).complete is False
        assert get_output(deps, ALICE, job.job_id, START, limit=2).complete is True

    def test_someone_elses_output_is_not_found(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        job = stored(repository, clock, stream=True)
        self.events(deps, job, 1, ["secret"], clock)

        with pytest.raises(JobNotFoundError):
            get_output(deps, BOB, job.job_id, START, limit=10)

    def test_a_job_that_does_not_stream_has_no_events(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        job = stored(repository, clock, status=JobStatus.SUCCEEDED)

        page = get_output(deps, ALICE, job.job_id, START, limit=10)

        assert page.events == []
        assert page.complete is True


class TestCancel:
    def test_a_pending_job_is_canceled_at_once(
        self,
        deps: StatusDependencies,
        repository: InMemoryJobRepository,
        payloads: InMemoryPayloadStore,
        clock: FakeClock,
    ) -> None:
        # Given a pending job with its input
        job = stored(repository, clock)
        payloads.put_input(JobInput(job_id=job.job_id, text="The text."), "item", job.expires_at)

        # When
        outcome = cancel_job(deps, ALICE, job.job_id)

        # Then
        assert outcome.in_progress is False
        assert outcome.job.status is JobStatus.CANCELED
        assert outcome.job.cancel_requested_at == clock.now()
        assert repository.get_job(job.job_id) == outcome.job
        assert job.job_id not in repository.sweep_at
        # and its input is deleted 24 h after the end
        assert payloads.expires_at[("input", job.job_id, "item")] == clock.now() + timedelta(hours=24)

    def test_a_running_job_is_asked_to_stop(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        job = claim(repository, stored(repository, clock), clock.now())

        outcome = cancel_job(deps, ALICE, job.job_id)

        assert outcome.in_progress is True
        assert outcome.job.status is JobStatus.CANCELLATION_REQUESTED
        assert outcome.job.cancel_requested_at == clock.now()
        # The lease holder keeps the job until it sees the request.
        assert outcome.job.lease_token == LEASE_TOKEN

    @pytest.mark.parametrize(
        ("running", "in_progress"), [(False, False), (True, True)], ids=["was pending", "was running"]
    )
    def test_cancelling_again_gives_the_same_answer_without_a_write(
        self,
        deps: StatusDependencies,
        repository: InMemoryJobRepository,
        clock: FakeClock,
        running: bool,
        in_progress: bool,
    ) -> None:
        job = stored(repository, clock)
        if running:
            claim(repository, job, clock.now())
        first = cancel_job(deps, ALICE, job.job_id)
        writes = list(repository.writes)
        clock.advance(seconds=3)

        again = cancel_job(deps, ALICE, job.job_id)

        assert (again.job, again.in_progress) == (first.job, in_progress)
        assert repository.writes == writes

    @pytest.mark.parametrize("status", [JobStatus.SUCCEEDED, JobStatus.FAILED], ids=lambda s: s.value)
    def test_a_job_that_ended_cannot_be_canceled(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock, status: JobStatus
    ) -> None:
        job = stored(repository, clock, status=status, error=JobError(code="content_policy", message="No."))
        writes = list(repository.writes)

        with pytest.raises(JobNotCancelableError):
            cancel_job(deps, ALICE, job.job_id)

        assert repository.writes == writes

    @pytest.mark.parametrize("caller", [BOB, ALICE_ELSEWHERE], ids=["other sub", "same sub other tenant"])
    def test_someone_elses_job_is_not_found_and_left_alone(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock, caller: Caller
    ) -> None:
        job = stored(repository, clock)

        with pytest.raises(JobNotFoundError):
            cancel_job(deps, caller, job.job_id)

        assert repository.get_job(job.job_id) == job

    def test_a_cancel_racing_a_claim_ends_as_cancellation_requested(
        self, payloads: InMemoryPayloadStore, clock: FakeClock
    ) -> None:
        # Given a worker that claims the job between the cancel's read and its write
        class ClaimedMeanwhile(InMemoryJobRepository):
            raced = False

            def transition(self, transition: Transition) -> JobRecord:
                if not self.raced:
                    self.raced = True
                    claim(self, self.jobs[transition.job_id], transition.now)
                return super().transition(transition)

        repository = ClaimedMeanwhile()
        job = stored(repository, clock)
        payloads.put_input(JobInput(job_id=job.job_id, text="The text."), "item", job.expires_at)

        # When
        outcome = cancel_job(deps_with(repository, payloads, clock), ALICE, job.job_id)

        # Then the cancel is a request to the lease holder, and the input stays for it: the expiry
        # the cancel set before its write lost is a full retention away, and the holder's own
        # terminal write sets the final one
        assert outcome.in_progress is True
        assert outcome.job.status is JobStatus.CANCELLATION_REQUESTED
        assert (outcome.job.attempts, outcome.job.lease_token) == (1, LEASE_TOKEN)
        assert payloads.get_input(job.job_id, "item") is not None
        assert payloads.expires_at[("input", job.job_id, "item")] >= clock.now() + timedelta(hours=24)

    def test_a_cancel_racing_the_last_write_of_a_worker_is_refused(
        self, payloads: InMemoryPayloadStore, clock: FakeClock
    ) -> None:
        # Given a running job whose worker succeeds just before the cancel's write
        class FinishedMeanwhile(InMemoryJobRepository):
            raced = False

            def transition(self, transition: Transition) -> JobRecord:
                if not self.raced and transition.target is JobStatus.CANCELLATION_REQUESTED:
                    self.raced = True
                    super().transition(
                        Transition(
                            job_id=transition.job_id,
                            source=JobStatus.RUNNING,
                            target=JobStatus.SUCCEEDED,
                            now=transition.now,
                            lease_token=LEASE_TOKEN,
                            result_location="item",
                        )
                    )
                return super().transition(transition)

        repository = FinishedMeanwhile()
        job = claim(repository, stored(repository, clock), clock.now())

        with pytest.raises(JobNotCancelableError):
            cancel_job(deps_with(repository, payloads, clock), ALICE, job.job_id)

    def test_a_job_that_vanishes_during_the_cancel_is_not_found(
        self, payloads: InMemoryPayloadStore, clock: FakeClock
    ) -> None:
        class Vanishing(InMemoryJobRepository):
            def transition(self, transition: Transition) -> JobRecord:
                raise TransitionConflictError(None)

        repository = Vanishing()
        job = stored(repository, clock)

        with pytest.raises(JobNotFoundError):
            cancel_job(deps_with(repository, payloads, clock), ALICE, job.job_id)

    def test_a_job_that_keeps_changing_gives_up_with_a_retryable_error(
        self, payloads: InMemoryPayloadStore, clock: FakeClock
    ) -> None:
        class AlwaysLosing(InMemoryJobRepository):
            attempts = 0

            def transition(self, transition: Transition) -> JobRecord:
                self.attempts += 1
                raise TransitionConflictError(self.jobs[transition.job_id])

        repository = AlwaysLosing()
        job = stored(repository, clock)

        with pytest.raises(StorageUnavailableError):
            cancel_job(deps_with(repository, payloads, clock), ALICE, job.job_id)

        assert 1 < repository.attempts <= 10


class TestList:
    @staticmethod
    def seed(
        repository: InMemoryJobRepository, clock: FakeClock, count: int, **fields: Any
    ) -> list[JobRecord]:
        """`count` jobs of Alice's, a second apart, oldest first."""
        start = clock.now() - timedelta(hours=1)
        return [
            stored(repository, clock, created_at=start + timedelta(seconds=n), **fields) for n in range(count)
        ]

    @staticmethod
    def ids(page: JobPage) -> list[str]:
        return [item.job_id for item in page.items]

    def walk(self, deps: StatusDependencies, status: JobStatus | None, limit: int) -> list[JobPage]:
        pages = [list_jobs(deps, ALICE, status, limit, None)]
        while pages[-1].next_cursor is not None:
            assert len(pages) < 50, "the cursor does not advance"
            pages.append(list_jobs(deps, ALICE, status, limit, pages[-1].next_cursor))
        return pages

    def test_newest_first_and_only_the_callers_jobs(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        # Given Alice's jobs, and jobs of Bob's and of Alice in another tenant
        mine = self.seed(repository, clock, 4)
        stored(repository, clock, caller=BOB)
        stored(repository, clock, caller=ALICE_ELSEWHERE)

        # When
        page = list_jobs(deps, ALICE, None, 20, None)

        # Then
        assert self.ids(page) == [job.job_id for job in reversed(mine)]
        assert page.next_cursor is None

    def test_items_are_status_documents(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        (job,) = self.seed(repository, clock, 1)

        page = list_jobs(deps, ALICE, None, 20, None)

        assert page.to_wire()["items"] == [job.status_document().to_wire()]

    def test_the_status_filter_keeps_only_that_status(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        pending = self.seed(repository, clock, 2)
        failed = self.seed(repository, clock, 2, status=JobStatus.FAILED)

        page = list_jobs(deps, ALICE, JobStatus.FAILED, 20, None)

        assert set(self.ids(page)) == {job.job_id for job in failed}
        assert not set(self.ids(page)) & {job.job_id for job in pending}

    def test_expired_jobs_are_never_listed(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        live = self.seed(repository, clock, 1)
        stored(repository, clock, expires_at=clock.now())

        assert self.ids(list_jobs(deps, ALICE, None, 20, None)) == [live[0].job_id]

    @pytest.mark.parametrize(("count", "limit"), [(5, 2), (4, 2), (7, 3), (3, 100), (1, 1)])
    def test_the_cursors_walk_through_every_job_once_in_order(
        self,
        deps: StatusDependencies,
        repository: InMemoryJobRepository,
        clock: FakeClock,
        count: int,
        limit: int,
    ) -> None:
        jobs = self.seed(repository, clock, count)

        pages = self.walk(deps, None, limit)

        assert [job_id for page in pages for job_id in self.ids(page)] == [
            job.job_id for job in reversed(jobs)
        ]
        assert all(len(page.items) <= limit for page in pages)

    def test_a_page_may_be_short_while_a_next_cursor_is_set(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        # Given Succeeded and Pending jobs interleaved, newest first: S P S P S P
        start = clock.now() - timedelta(minutes=10)
        jobs = [
            stored(
                repository,
                clock,
                created_at=start + timedelta(seconds=n),
                status=JobStatus.PENDING if n % 2 == 0 else JobStatus.SUCCEEDED,
            )
            for n in range(6)
        ]

        # When listing Succeeded jobs two items read at a time
        pages = self.walk(deps, JobStatus.SUCCEEDED, 2)

        # Then every page is short but the walk still finds all three, newest first; the read that
        # stopped at the limit on the last item still had a next position (as in DynamoDB), so the
        # walk ends on an empty page
        assert [len(page.items) for page in pages] == [1, 1, 1, 0]
        expected = [job.job_id for job in reversed(jobs) if job.status is JobStatus.SUCCEEDED]
        assert [job_id for page in pages for job_id in self.ids(page)] == expected

    def test_jobs_submitted_in_the_same_millisecond_list_in_submission_order(
        self, repository: InMemoryJobRepository, payloads: InMemoryPayloadStore, clock: FakeClock
    ) -> None:
        # Given three submits while the clock does not move
        submit_deps = SubmitDependencies(
            settings=SubmitSettings.model_validate(
                {
                    r.ENV_JOBS_TABLE: "j",
                    r.ENV_IDEMPOTENCY_TABLE: "i",
                    r.ENV_PAYLOAD_BUCKET: "b",
                    r.ENV_BUDGETS_TABLE: "g",
                    r.ENV_DOCUMENTS_TABLE: "d",
                    r.ENV_DOCUMENTS_BUCKET: "d",
                }
            ),
            repository=repository,
            payloads=payloads,
            clock=clock,
            budgets=InMemoryBudgetLedger(),
            documents=InMemoryDocumentRepository(),
            document_objects=InMemoryDocumentObjects(),
        )
        body = SubmitRequest.model_validate({"operation": "summarize", "input": {"text": "x"}})
        submitted = [submit_job(submit_deps, ALICE, body, f"key-{n}").job.job_id for n in range(3)]

        # When
        page = list_jobs(deps_with(repository, payloads, clock), ALICE, None, 20, None)

        # Then the newest is first
        assert self.ids(page) == list(reversed(submitted))

    def test_an_invalid_cursor_is_refused(self, deps: StatusDependencies) -> None:
        with pytest.raises(InvalidCursorError):
            list_jobs(deps, ALICE, None, 20, "not-a-cursor")

    def test_another_callers_cursor_is_refused(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        self.seed(repository, clock, 3)
        cursor = list_jobs(deps, ALICE, None, 1, None).next_cursor
        assert cursor is not None

        for caller in (BOB, ALICE_ELSEWHERE):
            with pytest.raises(InvalidCursorError):
                list_jobs(deps, caller, None, 1, cursor)

    def test_a_cursor_is_refused_under_another_filter(
        self, deps: StatusDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        self.seed(repository, clock, 3)
        cursor = list_jobs(deps, ALICE, JobStatus.PENDING, 1, None).next_cursor
        assert cursor is not None

        for other in (None, JobStatus.RUNNING):
            with pytest.raises(InvalidCursorError):
                list_jobs(deps, ALICE, other, 1, cursor)

    def test_an_empty_list_has_no_cursor(self, deps: StatusDependencies) -> None:
        page = list_jobs(deps, ALICE, None, 20, None)

        assert page.to_wire() == {"items": [], "nextCursor": None}
