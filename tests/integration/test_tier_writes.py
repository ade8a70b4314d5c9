"""The job writes of the token bill (DESIGN.md, "Cost tiers"), on the DynamoDB adapter (moto) and
the in-memory fake alike: a job's tier, a deferral that gives its claim's attempt back, and usage
that adds up cached input tokens and the tiers its calls ran at."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from shared.job import Usage
from shared.lifecycle import JobStatus
from shared.ports import JobRepository, Lease, Transition
from shared.tiers import Tier
from tests.fakes import InMemoryJobRepository
from tests.support import jobs
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

FLEX_CALL = Usage(input_tokens=2000, output_tokens=10, cached_input_tokens=1024, tiers=frozenset({Tier.FLEX}))
STANDARD_CALL = Usage(input_tokens=100, output_tokens=5, tiers=frozenset({Tier.STANDARD}))


@pytest.fixture(params=["dynamodb", "fake"])
def repository(request: pytest.FixtureRequest) -> JobRepository:
    if request.param == "fake":
        return InMemoryJobRepository()
    resources: TestResources = request.getfixturevalue("resources")
    return Storage(resources).repository()


def back_to_pending(
    repository: JobRepository, running_id: str, token: str, *, usage: Usage | None, refund: bool
) -> None:
    now = jobs.now_millis()
    repository.transition(
        Transition(
            job_id=running_id,
            source=JobStatus.RUNNING,
            target=JobStatus.PENDING,
            now=now,
            lease_token=token,
            dispatch_at=now,
            usage=usage,
            refund_attempt=refund,
        )
    )


def test_a_flex_job_reads_back_flex_and_a_standard_one_standard(repository: JobRepository) -> None:
    flex = jobs.create(repository, jobs.new_job().model_copy(update={"tier": Tier.FLEX}))
    standard = jobs.create(repository, jobs.new_job())

    assert repository.get_job(flex.job_id).tier is Tier.FLEX  # type: ignore[union-attr]
    assert repository.get_job(standard.job_id).tier is Tier.STANDARD  # type: ignore[union-attr]


def test_a_deferral_gives_the_claims_attempt_back(repository: JobRepository) -> None:
    job = jobs.create(repository, jobs.new_job())
    running = jobs.claim(repository, job.job_id, token="t1")

    back_to_pending(repository, running.job_id, "t1", usage=None, refund=True)

    deferred = repository.get_job(job.job_id)
    assert deferred is not None
    assert (deferred.status, deferred.attempts, deferred.stalls) == (JobStatus.PENDING, 0, 0)


def test_usage_adds_cached_tokens_and_keeps_every_tier(repository: JobRepository) -> None:
    job = jobs.create(repository, jobs.new_job())
    jobs.claim(repository, job.job_id, token="t1")
    back_to_pending(repository, job.job_id, "t1", usage=FLEX_CALL, refund=False)
    jobs.claim(repository, job.job_id, token="t2")

    back_to_pending(repository, job.job_id, "t2", usage=STANDARD_CALL, refund=False)

    usage = repository.get_job(job.job_id).usage  # type: ignore[union-attr]
    assert usage == Usage(
        input_tokens=2100,
        output_tokens=15,
        cached_input_tokens=1024,
        tiers=frozenset({Tier.FLEX, Tier.STANDARD}),
    )
    assert usage.document().tiers == [Tier.STANDARD, Tier.FLEX]


def test_progress_replaces_the_sum_but_keeps_the_tiers_seen(repository: JobRepository) -> None:
    job = jobs.create(repository, jobs.new_job())
    running = jobs.claim(repository, job.job_id, token="t1")
    lease = Lease(token="t1", expires_at=running.lease_expires_at)  # type: ignore[arg-type]
    repository.record_progress(job.job_id, lease, 1, FLEX_CALL, None)

    repository.record_progress(job.job_id, lease, 2, STANDARD_CALL, None)

    usage = repository.get_job(job.job_id).usage  # type: ignore[union-attr]
    assert usage is not None
    assert usage.input_tokens == STANDARD_CALL.input_tokens
    assert usage.tiers == {Tier.FLEX, Tier.STANDARD}
