"""The submit use case with in-memory ports: one job per (caller, key, request), whatever happens."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from functions.submit.dependencies import SubmitDependencies
from functions.submit.service import SubmitOutcome, submit_job
from functions.submit.settings import SubmitSettings
from shared import resources as r
from shared.contract import SubmitRequest
from shared.errors import (
    IdempotencyKeyReusedError,
    ModelNotAllowedError,
    RateLimitedError,
    StorageUnavailableError,
)
from shared.job import Caller, IdempotencyRecord, JobInput, JobRecord
from shared.lifecycle import JobStatus
from shared.ports import Lease, Transition
from shared.prompts import template_for
from tests.budget_fakes import InMemoryBudgetLedger
from tests.document_fakes import InMemoryDocumentObjects, InMemoryDocumentRepository
from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore

ALICE = Caller(tenant="acme", sub="alice")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
SUMMARIZE: dict[str, Any] = {"operation": "summarize", "input": {"text": "The quarterly report, in short."}}
# Too long to ride in the job item, far below the 8 KB at which an input goes to S3: an input item.
APART: dict[str, Any] = {"operation": "summarize", "input": {"text": "The report, at length. " * 36}}


def settings(**env: str) -> SubmitSettings:
    return SubmitSettings.model_validate(
        {
            r.ENV_JOBS_TABLE: "jobs",
            r.ENV_IDEMPOTENCY_TABLE: "idempotency",
            r.ENV_PAYLOAD_BUCKET: "payloads",
            r.ENV_BUDGETS_TABLE: "budgets",
            r.ENV_DOCUMENTS_TABLE: "documents",
            r.ENV_DOCUMENTS_BUCKET: "documents",
            "SUBMITS_PER_MINUTE": "5",
            "ALLOWED_MODELS": "gpt-4o-mini,gpt-4o",
            **env,
        }
    )


def request(body: dict[str, Any] = SUMMARIZE) -> SubmitRequest:
    return SubmitRequest.model_validate(json.loads(json.dumps(body)))


@pytest.fixture
def deps(
    repository: InMemoryJobRepository, payloads: InMemoryPayloadStore, clock: FakeClock
) -> SubmitDependencies:
    return SubmitDependencies(
        settings=settings(),
        repository=repository,
        payloads=payloads,
        clock=clock,
        budgets=InMemoryBudgetLedger(),
        documents=InMemoryDocumentRepository(),
        document_objects=InMemoryDocumentObjects(),
    )


def submit(
    deps: SubmitDependencies, body: dict[str, Any] = SUMMARIZE, key: str = "key-1", caller: Caller = ALICE
) -> SubmitOutcome:
    return submit_job(deps, caller, request(body), key)


class TestNewSubmit:
    def test_creates_a_pending_job_due_at_once(self, deps: SubmitDependencies, clock: FakeClock) -> None:
        # Given a clock with sub-millisecond precision
        clock.set(datetime(2030, 1, 15, 12, 0, 30, 250_777, tzinfo=UTC))

        # When
        outcome = submit(deps)

        # Then
        job = outcome.job
        assert outcome.replayed is False
        assert UUID4.match(job.job_id)
        assert job.status is JobStatus.PENDING
        assert job.attempts == 0
        assert job.created_at == job.updated_at == job.dispatch_at
        assert job.created_at == datetime(
            2030, 1, 15, 12, 0, 30, 250_000, tzinfo=UTC
        )  # milliseconds, as stored
        assert job.expires_at == job.created_at + timedelta(days=30)
        assert (job.tenant, job.owner) == (ALICE.tenant, ALICE.sub)
        assert job.cancel_requested_at is None
        assert job.lease_token is None

    def test_records_the_server_defaults_on_the_job(self, deps: SubmitDependencies) -> None:
        job = submit(deps).job

        assert job.model == "gpt-4o-mini"
        assert job.prompt_version == template_for(job.operation).version
        assert job.max_attempts == 3

    def test_stores_the_job_its_input_and_its_claim(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, payloads: InMemoryPayloadStore
    ) -> None:
        outcome = submit(deps, APART)

        assert repository.get_job(outcome.job.job_id) == outcome.job
        assert outcome.job.input_location == "item"
        assert payloads.get_input(outcome.job.job_id, "item") == JobInput(
            job_id=outcome.job.job_id, text=APART["input"]["text"]
        )
        assert [claim.job_id for claim in repository.claims.values()] == [outcome.job.job_id]

    def test_a_small_input_rides_in_the_job_item_with_no_write_of_its_own(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, payloads: InMemoryPayloadStore
    ) -> None:
        outcome = submit(deps)

        stored = repository.get_job(outcome.job.job_id)
        assert stored is not None
        assert stored.input_location == "job"
        assert stored.inline_input() == JobInput(job_id=outcome.job.job_id, text=SUMMARIZE["input"]["text"])
        assert payloads.writes == []

    def test_writes_in_the_design_order_claim_input_job(self, deps: SubmitDependencies) -> None:
        order: list[str] = []

        class Recording(InMemoryJobRepository):
            def claim_idempotency_key(
                self, record: IdempotencyRecord, now: datetime
            ) -> IdempotencyRecord | None:
                order.append("claim")
                return super().claim_idempotency_key(record, now)

            def create_job(self, job: JobRecord, sweep_at: datetime) -> bool:
                order.append("job")
                return super().create_job(job, sweep_at)

        class RecordingPayloads(InMemoryPayloadStore):
            def put_input(self, job_input: JobInput, location: Any, expires_at: datetime) -> None:
                order.append("input")
                super().put_input(job_input, location, expires_at)

        submit(
            SubmitDependencies(
                deps.settings,
                Recording(),
                RecordingPayloads(),
                deps.clock,
                deps.budgets,
                InMemoryDocumentRepository(),
                InMemoryDocumentObjects(),
            ),
            APART,
        )

        assert order == ["claim", "input", "job"]

    def test_the_sweeper_looks_at_the_job_one_look_after_its_submit(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository
    ) -> None:
        # The only sweep index write before the terminal one: claims and releases leave it alone
        job = submit(deps).job

        assert repository.sweep_at[job.job_id] == job.dispatch_at + timedelta(
            seconds=deps.settings.sweep_look_seconds
        )

    @pytest.mark.parametrize("text", ["Win a cruise!", "Win a cruise! " * 40], ids=["inline", "apart"])
    def test_keeps_the_classify_options_with_the_input(
        self,
        deps: SubmitDependencies,
        repository: InMemoryJobRepository,
        payloads: InMemoryPayloadStore,
        text: str,
    ) -> None:
        body = {
            "operation": "classify",
            "input": {"text": text},
            "options": {"labels": ["spam", "ham"], "maxOutputTokens": 4, "model": "gpt-4o"},
        }

        job = submit(deps, body).job

        stored = repository.get_job(job.job_id)
        assert stored is not None
        inline = stored.input_location == "job"
        kept = stored.inline_input() if inline else payloads.get_input(job.job_id, "item")
        assert stored.input_location == ("job" if len(text) < 100 else "item")
        assert job.model == "gpt-4o"
        assert kept == JobInput(job_id=job.job_id, text=text, max_output_tokens=4, labels=("spam", "ham"))

    def test_each_key_makes_its_own_job(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository
    ) -> None:
        first = submit(deps, key="key-1").job
        second = submit(deps, key="key-2").job

        assert first.job_id != second.job_id
        assert len(repository.jobs) == 2


class TestInputLocation:
    """Inputs over 8 KiB serialized go to S3; the rest stay beside the job."""

    @staticmethod
    def text_of_serialized_size(size: int) -> str:
        overhead = len(JobInput(job_id="0" * 36, text="").model_dump_json().encode("utf-8"))
        return "a" * (size - overhead)

    def test_an_input_of_exactly_8_kib_stays_in_the_item(
        self, deps: SubmitDependencies, payloads: InMemoryPayloadStore
    ) -> None:
        job = submit(
            deps, {"operation": "summarize", "input": {"text": self.text_of_serialized_size(8192)}}
        ).job

        assert job.input_location == "item"
        assert payloads.get_input(job.job_id, "item") is not None

    def test_an_input_one_byte_over_8_kib_goes_to_s3(
        self, deps: SubmitDependencies, payloads: InMemoryPayloadStore
    ) -> None:
        job = submit(
            deps, {"operation": "summarize", "input": {"text": self.text_of_serialized_size(8193)}}
        ).job

        assert job.input_location == "s3"
        assert payloads.get_input(job.job_id, "s3") is not None
        assert payloads.get_input(job.job_id, "item") is None

    def test_size_is_measured_in_utf8_bytes(self, deps: SubmitDependencies) -> None:
        # 3,000 characters, but 9,000 bytes: over the limit.
        job = submit(deps, {"operation": "summarize", "input": {"text": "€" * 3000}}).job

        assert job.input_location == "s3"


class TestReplay:
    def test_the_same_key_and_body_answer_with_the_same_job(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository
    ) -> None:
        # Given
        first = submit(deps)

        # When
        again = submit(deps)

        # Then
        assert again.replayed is True
        assert again.job == first.job
        assert len(repository.jobs) == 1
        assert repository.writes.count("create_job") == 1
        assert repository.writes.count("claim_idempotency_key") == 1

    def test_the_same_body_with_keys_in_another_order_replays(self, deps: SubmitDependencies) -> None:
        first = submit(deps, {"input": {"text": "x"}, "operation": "summarize"})

        again = submit(deps, {"operation": "summarize", "input": {"text": "x"}})

        assert (again.replayed, again.job.job_id) == (True, first.job.job_id)

    def test_a_replay_answers_with_where_the_job_stands_now(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        # Given a job a worker has claimed since
        job = submit(deps).job
        clock.advance(seconds=1)
        repository.transition(
            Transition(
                job_id=job.job_id,
                source=JobStatus.PENDING,
                target=JobStatus.RUNNING,
                now=clock.now(),
                new_lease=Lease(token="lease-1", expires_at=clock.now() + timedelta(seconds=60)),
                count_attempt=True,
                require_due=True,
            )
        )

        # When
        again = submit(deps)

        # Then
        assert again.replayed is True
        assert again.job.status is JobStatus.RUNNING
        assert again.job.attempts == 1

    def test_a_replay_after_a_deploy_changed_the_defaults_still_replays(
        self, repository: InMemoryJobRepository, payloads: InMemoryPayloadStore, clock: FakeClock
    ) -> None:
        # Given a job accepted under one default model and attempt budget
        before = SubmitDependencies(
            settings(DEFAULT_MODEL="gpt-4o-mini"),
            repository,
            payloads,
            clock,
            InMemoryBudgetLedger(),
            InMemoryDocumentRepository(),
            InMemoryDocumentObjects(),
        )
        first = submit(before).job
        # When a deploy changes them and the client retries
        after = SubmitDependencies(
            settings(DEFAULT_MODEL="gpt-4o", MAX_ATTEMPTS="5"),
            repository,
            payloads,
            clock,
            before.budgets,
            InMemoryDocumentRepository(),
            InMemoryDocumentObjects(),
        )
        again = submit(after)

        # Then the replay is the job as first accepted
        assert again.replayed is True
        assert again.job == first
        assert (again.job.model, again.job.max_attempts) == ("gpt-4o-mini", 3)

    def test_another_body_under_the_same_key_is_refused_and_writes_nothing(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, payloads: InMemoryPayloadStore
    ) -> None:
        # Given
        submit(deps)
        jobs, claims, payload_writes = dict(repository.jobs), dict(repository.claims), list(payloads.writes)
        writes_before = len(repository.writes)

        # When
        with pytest.raises(IdempotencyKeyReusedError):
            submit(deps, {"operation": "summarize", "input": {"text": "Something else."}})

        # Then nothing moved, not even the submit counter: a 409 consumes no quota
        assert repository.jobs == jobs
        assert repository.claims == claims
        assert payloads.writes == payload_writes
        assert repository.writes[writes_before:] == []

    def test_the_refusal_does_not_leak_the_fingerprint(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository
    ) -> None:
        submit(deps)
        (claim,) = repository.claims.values()

        with pytest.raises(IdempotencyKeyReusedError) as caught:
            submit(deps, {"operation": "analyze", "input": {"text": "x"}})

        assert claim.fingerprint not in caught.value.detail
        assert claim.job_id not in caught.value.detail

    @pytest.mark.parametrize(
        "other",
        [
            Caller(tenant="acme", sub="bob"),
            Caller(tenant="globex", sub="alice"),
            Caller(tenant="user:alice", sub="alice"),
        ],
        ids=["other sub", "same sub other tenant", "same sub personal tenant"],
    )
    def test_the_same_key_from_another_caller_is_an_independent_job(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, other: Caller
    ) -> None:
        mine = submit(deps, caller=ALICE)

        theirs = submit(deps, caller=other)

        assert theirs.replayed is False
        assert theirs.job.job_id != mine.job.job_id
        assert len(repository.jobs) == 2

    def test_even_another_body_from_another_caller_under_the_same_key_is_accepted(
        self, deps: SubmitDependencies
    ) -> None:
        submit(deps, caller=ALICE)

        outcome = submit(
            deps, {"operation": "analyze", "input": {"text": "x"}}, caller=Caller(tenant="acme", sub="bob")
        )

        assert outcome.replayed is False

    def test_the_claim_lives_24_hours(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        # Given a job submitted 24 hours ago to the millisecond
        first = submit(deps)
        clock.advance(hours=24)

        # When the client retries, the claim is still live
        again = submit(deps)

        # Then
        assert (again.replayed, again.job.job_id) == (True, first.job.job_id)
        assert len(repository.jobs) == 1

    def test_after_the_claim_expired_the_same_key_makes_a_new_job(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        # Given a claim one millisecond past its 24 hours (TTL may not have deleted it yet)
        first = submit(deps)
        clock.advance(hours=24, milliseconds=1)

        # When
        later = submit(deps)

        # Then
        assert later.replayed is False
        assert later.job.job_id != first.job.job_id
        assert len(repository.jobs) == 2

    def test_a_concurrent_identical_submit_gets_the_same_job_never_a_conflict(
        self, payloads: InMemoryPayloadStore, clock: FakeClock
    ) -> None:
        # Given another request with the same key and body that wins every step just before ours
        class Racing(InMemoryJobRepository):
            raced = False

            def claim_idempotency_key(
                self, record: IdempotencyRecord, now: datetime
            ) -> IdempotencyRecord | None:
                if not self.raced:
                    self.raced = True
                    submit(racing)
                return super().claim_idempotency_key(record, now)

        repository = Racing()
        racing = SubmitDependencies(
            settings(),
            repository,
            payloads,
            clock,
            InMemoryBudgetLedger(),
            InMemoryDocumentRepository(),
            InMemoryDocumentObjects(),
        )

        # When
        ours = submit(racing)

        # Then
        assert ours.replayed is True
        assert list(repository.jobs) == [ours.job.job_id]


class TestCrashBetweenSteps:
    """A crash after the claim leaves what a retry with the same key completes."""

    class InputWriteFailsOnce(InMemoryPayloadStore):
        failures = 1

        def put_input(self, job_input: JobInput, location: Any, expires_at: datetime) -> None:
            if self.failures:
                self.failures -= 1
                raise StorageUnavailableError("Storage is busy; retry shortly.")
            super().put_input(job_input, location, expires_at)

    class JobWriteFailsOnce(InMemoryJobRepository):
        failures = 1

        def create_job(self, job: JobRecord, sweep_at: datetime) -> bool:
            if self.failures:
                self.failures -= 1
                raise StorageUnavailableError("Storage is busy; retry shortly.")
            return super().create_job(job, sweep_at)

    @pytest.mark.parametrize(
        ("repository_type", "payloads_type"),
        [(InMemoryJobRepository, InputWriteFailsOnce), (JobWriteFailsOnce, InMemoryPayloadStore)],
        ids=["input write fails", "job write fails"],
    )
    def test_a_retry_completes_the_job_under_the_claimed_id(
        self,
        repository_type: type[InMemoryJobRepository],
        payloads_type: type[InMemoryPayloadStore],
        clock: FakeClock,
    ) -> None:
        # Given a submit that crashed after its idempotency claim
        repository, payloads = repository_type(), payloads_type()
        deps = SubmitDependencies(
            settings(),
            repository,
            payloads,
            clock,
            InMemoryBudgetLedger(),
            InMemoryDocumentRepository(),
            InMemoryDocumentObjects(),
        )
        with pytest.raises(StorageUnavailableError):
            submit(deps, APART)
        (claim,) = repository.claims.values()
        assert repository.jobs == {}

        # When the client retries with the same key a little later
        clock.advance(seconds=2)
        outcome = submit(deps, APART)

        # Then exactly one job exists, under the id of the claim, with its input
        assert outcome.job.job_id == claim.job_id
        assert outcome.job.created_at == claim.created_at
        assert list(repository.jobs) == [claim.job_id]
        assert payloads.get_input(claim.job_id, "item") is not None

    def test_an_input_whose_job_was_never_written_goes_with_its_claim(self, clock: FakeClock) -> None:
        """A submit that crashed after its input and was never retried: the input is written to
        expire one retention after the submit, not with the job's 30 days."""
        repository = self.JobWriteFailsOnce()
        payloads = InMemoryPayloadStore()
        with pytest.raises(StorageUnavailableError):
            submit(
                SubmitDependencies(
                    settings(),
                    repository,
                    payloads,
                    clock,
                    InMemoryBudgetLedger(),
                    InMemoryDocumentRepository(),
                    InMemoryDocumentObjects(),
                ),
                APART,
            )

        (claim,) = repository.claims.values()
        assert repository.jobs == {}
        assert payloads.expires_at[("input", claim.job_id, "item")] == clock.now() + timedelta(hours=24)

    def test_a_crash_before_the_claim_leaves_nothing(
        self, payloads: InMemoryPayloadStore, clock: FakeClock
    ) -> None:
        class ClaimFails(InMemoryJobRepository):
            def claim_idempotency_key(
                self, record: IdempotencyRecord, now: datetime
            ) -> IdempotencyRecord | None:
                raise StorageUnavailableError("Storage is busy; retry shortly.")

        repository = ClaimFails()
        deps = SubmitDependencies(
            settings(),
            repository,
            payloads,
            clock,
            InMemoryBudgetLedger(),
            InMemoryDocumentRepository(),
            InMemoryDocumentObjects(),
        )

        with pytest.raises(StorageUnavailableError):
            submit(deps)

        assert (repository.jobs, repository.claims, payloads.writes) == ({}, {}, [])


class TestRateLimit:
    def test_over_the_rate_the_submit_is_refused_with_a_retry_after(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        # Given an owner who used the 5 submits of this minute
        clock.set(datetime(2030, 1, 15, 12, 0, 45, 500_000, tzinfo=UTC))
        for n in range(5):
            submit(deps, key=f"key-{n}")

        # When
        with pytest.raises(RateLimitedError) as caught:
            submit(deps, key="key-6")

        # Then
        assert caught.value.retry_after == 15
        assert len(repository.jobs) == 5

    @pytest.mark.parametrize(("second", "retry_after"), [(0, 60), (1, 59), (30, 30), (59, 1)])
    def test_retry_after_points_at_the_next_minute_and_is_1_to_60(
        self, deps: SubmitDependencies, clock: FakeClock, second: int, retry_after: int
    ) -> None:
        clock.set(datetime(2030, 1, 15, 12, 0, second, 999_000, tzinfo=UTC))
        for n in range(5):
            submit(deps, key=f"key-{n}")

        with pytest.raises(RateLimitedError) as caught:
            submit(deps, key="one-too-many")

        assert 1 <= caught.value.retry_after <= 60
        assert caught.value.retry_after == retry_after

    def test_the_quota_is_back_in_the_next_minute(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        clock.set(datetime(2030, 1, 15, 12, 0, 59, 900_000, tzinfo=UTC))
        for n in range(5):
            submit(deps, key=f"key-{n}")
        with pytest.raises(RateLimitedError):
            submit(deps, key="late")

        clock.advance(milliseconds=100)
        outcome = submit(deps, key="late")

        assert outcome.replayed is False
        assert len(repository.jobs) == 6

    def test_a_retry_over_the_rate_still_replays_its_job(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        # Given a client whose submit was accepted, then who used up the minute's quota
        first = submit(deps, key="lost-answer")
        for n in range(4):
            submit(deps, key=f"key-{n}")

        # When it retries the first submit in the same minute (its answer was lost)
        again = submit(deps, key="lost-answer")

        # Then it learns its job: a replay is checked before the rate, and costs no quota
        assert again.replayed is True
        assert again.job.job_id == first.job.job_id
        assert sum(repository.submits.values()) == 5

    def test_a_submit_refused_by_the_rate_leaves_no_claim_behind(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        # Given a used-up minute
        clock.set(datetime(2030, 1, 15, 12, 0, 50, tzinfo=UTC))
        for n in range(5):
            submit(deps, key=f"key-{n}")
        claims_before = dict(repository.claims)

        # When a new submit is refused
        with pytest.raises(RateLimitedError):
            submit(deps, key="too-soon")

        # Then its claim is gone, so its retry next minute starts fresh and is accepted
        assert repository.claims == claims_before
        clock.advance(seconds=10)
        outcome = submit(deps, key="too-soon")
        assert outcome.replayed is False
        assert len(repository.jobs) == 6

    def test_the_quota_is_per_owner(self, deps: SubmitDependencies) -> None:
        for n in range(5):
            submit(deps, key=f"key-{n}")

        assert submit(deps, key="key-0", caller=Caller(tenant="acme", sub="bob")).replayed is False
        assert submit(deps, key="key-0", caller=Caller(tenant="globex", sub="alice")).replayed is False


class TestModelAllowlist:
    def test_a_model_outside_the_allowlist_is_refused_before_anything_is_written(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, payloads: InMemoryPayloadStore
    ) -> None:
        body = {**SUMMARIZE, "options": {"model": "gpt-5-ultra"}}

        with pytest.raises(ModelNotAllowedError):
            submit(deps, body)

        assert repository.writes == []
        assert payloads.writes == []

    def test_an_allowed_model_is_recorded_on_the_job(self, deps: SubmitDependencies) -> None:
        assert submit(deps, {**SUMMARIZE, "options": {"model": "gpt-4o"}}).job.model == "gpt-4o"

    def test_models_are_matched_exactly(self, deps: SubmitDependencies) -> None:
        with pytest.raises(ModelNotAllowedError):
            submit(deps, {**SUMMARIZE, "options": {"model": "GPT-4o"}})


GPT_4O: dict[str, Any] = {**SUMMARIZE, "options": {"model": "gpt-4o"}}


class TestModelAllowlistAfterADeploy:
    """The allowlist is server-side policy: a deploy that narrows it does not break a replay."""

    @staticmethod
    def narrowed(deps: SubmitDependencies) -> SubmitDependencies:
        return SubmitDependencies(
            settings=settings(ALLOWED_MODELS="gpt-4o-mini"),
            repository=deps.repository,
            payloads=deps.payloads,
            clock=deps.clock,
            budgets=deps.budgets,
            documents=InMemoryDocumentRepository(),
            document_objects=InMemoryDocumentObjects(),
        )

    def test_an_identical_retry_replays_its_job(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository
    ) -> None:
        first = submit(deps, GPT_4O)
        writes = list(repository.writes)

        again = submit(self.narrowed(deps), GPT_4O)

        assert again.replayed is True
        assert again.job.job_id == first.job.job_id
        assert repository.writes == writes

    def test_another_request_under_that_key_is_refused_for_its_model(self, deps: SubmitDependencies) -> None:
        submit(deps, GPT_4O)

        with pytest.raises(ModelNotAllowedError):
            submit(self.narrowed(deps), {**GPT_4O, "input": {"text": "Another text."}})

    def test_a_submit_that_stopped_between_writes_is_not_completed_for_a_refused_model(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository
    ) -> None:
        # Given a claim whose job was never written (the first submit crashed after its claim)
        first = submit(deps, GPT_4O)
        del repository.jobs[first.job.job_id]

        # When the retry comes after the deploy, Then today's allowlist decides, and no job appears
        with pytest.raises(ModelNotAllowedError):
            submit(self.narrowed(deps), GPT_4O)
        assert repository.jobs == {}

    def test_an_expired_claim_does_not_replay(
        self, deps: SubmitDependencies, repository: InMemoryJobRepository, clock: FakeClock
    ) -> None:
        submit(deps, GPT_4O)
        clock.advance(timedelta(hours=25))

        with pytest.raises(ModelNotAllowedError):
            submit(self.narrowed(deps), GPT_4O)


class TestRetention:
    def test_a_replay_does_not_undo_the_input_retention_of_a_finished_job(
        self,
        deps: SubmitDependencies,
        repository: InMemoryJobRepository,
        payloads: InMemoryPayloadStore,
        clock: FakeClock,
    ) -> None:
        # Given a job that ended (canceled) and whose input is due for deletion in 24 h (DESIGN.md)
        job = submit(deps, APART).job
        clock.advance(minutes=1)
        repository.transition(
            Transition(
                job_id=job.job_id,
                source=JobStatus.PENDING,
                target=JobStatus.CANCELED,
                now=clock.now(),
                cancel_requested_at=clock.now(),
            )
        )
        input_expiry = clock.now() + timedelta(hours=24)
        payloads.set_input_expiry(job.job_id, job.input_location, input_expiry)

        # When the client retries its submit within the 24 h of the idempotency claim
        clock.advance(minutes=1)
        again = submit(deps, APART)

        # Then it replays the canceled job and leaves the input's deletion where it was
        assert (again.replayed, again.job.status) == (True, JobStatus.CANCELED)
        assert payloads.expires_at[("input", job.job_id, job.input_location)] <= input_expiry
