"""The job record and the caller's view of it: the status document on the wire."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from shared.job import BudgetHold, Caller, JobError, Usage
from shared.lifecycle import JobStatus
from tests.fakes import job_record
from tests.support.answers import STATUS_DOCUMENT_FIELDS

CREATED = datetime(2030, 1, 15, 12, 0, 30, 250_000, tzinfo=UTC)
RFC3339_MILLIS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
WIRE_KEYS = STATUS_DOCUMENT_FIELDS  # the contract, spelled once for every layer


def internal_job(**overrides: object):
    """A job whose internal fields hold values that would stand out if they leaked."""
    fields: dict[str, object] = {
        "tenant": "tenant-internal",
        "owner": "owner-internal",
        "model": "model-internal",
        "prompt_version": "prompt-internal",
        "sequence_id": "01945f7e-8f7a-7abc-8def-00000000beef",
        "lease_token": "lease-token-internal",
        "lease_expires_at": CREATED + timedelta(minutes=1),
        "input_location": "s3",
        "result_location": "s3",
        "redrive_count": 7,
        "max_attempts": 9,
        "status": JobStatus.RUNNING,
        **overrides,
    }
    return job_record(CREATED, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", list(JobStatus), ids=lambda s: s.value)
def test_result_url_only_once_succeeded(status: JobStatus) -> None:
    job = job_record(CREATED, status=status)

    wire = job.status_document().to_wire()

    expected = f"/v1/jobs/{job.job_id}/result" if status is JobStatus.SUCCEEDED else None
    assert wire["resultUrl"] == expected


def test_the_wire_document_has_exactly_the_contract_fields() -> None:
    assert set(internal_job().status_document().to_wire()) == WIRE_KEYS


def test_no_internal_value_reaches_the_wire() -> None:
    text = json.dumps(internal_job().status_document().to_wire())

    for secret in (
        "tenant-internal",
        "owner-internal",
        "model-internal",
        "prompt-internal",
        "00000000beef",
        "lease-token-internal",
        "s3",
    ):
        assert secret not in text


def test_a_fresh_job_on_the_wire() -> None:
    job = job_record(CREATED)

    assert job.status_document().to_wire() == {
        "jobId": job.job_id,
        "status": "Pending",
        "operation": "summarize",
        "createdAt": "2030-01-15T12:00:30.250Z",
        "updatedAt": "2030-01-15T12:00:30.250Z",
        "expiresAt": "2030-02-14T12:00:30.250Z",
        "attempts": 0,
        "crashes": 0,
        "revision": 1,
        "progress": {"completedSteps": 0, "totalSteps": 1},
        "cancelRequestedAt": None,
        "resultUrl": None,
        "error": None,
        "usage": None,
        "reservedTokens": None,
        "stream": False,
        "waitingFor": None,
    }


@pytest.mark.parametrize(
    ("status", "settled", "shown"),
    [
        (JobStatus.PENDING, None, 900),
        (JobStatus.RUNNING, None, 900),
        (JobStatus.SUCCEEDED, None, None),  # nobody asked the ledger: settlement follows the end
        (JobStatus.FAILED, False, 900),  # the ledger says it is not settled yet
        (JobStatus.CANCELED, True, None),
    ],
)
def test_reserved_tokens_show_while_the_run_is_unsettled(
    status: JobStatus, settled: bool | None, shown: int | None
) -> None:
    job = job_record(CREATED, status=status, budget=BudgetHold(period="2030-01", tokens=900, base_tokens=5))

    assert job.status_document(settled=settled).to_wire()["reservedTokens"] == shown


def test_a_succeeded_one_step_job_shows_its_step_done() -> None:
    job = job_record(CREATED, status=JobStatus.SUCCEEDED)

    assert job.status_document().to_wire()["progress"] == {"completedSteps": 1, "totalSteps": 1}


def test_error_and_usage_are_shown_when_present() -> None:
    job = job_record(
        CREATED,
        status=JobStatus.FAILED,
        error=JobError(code="content_policy", message="The provider refused the input."),
        usage=Usage(input_tokens=12, output_tokens=0),
    )

    wire = job.status_document().to_wire()

    assert wire["error"] == {"code": "content_policy", "message": "The provider refused the input."}
    assert wire["usage"] == {
        "inputTokens": 12,
        "outputTokens": 0,
        "estimated": False,
        "cachedInputTokens": 0,
        "tiers": [],
    }


@pytest.mark.parametrize(
    ("instant", "text"),
    [
        (datetime(2030, 1, 15, 12, 0, 30, tzinfo=UTC), "2030-01-15T12:00:30.000Z"),
        (datetime(2030, 1, 15, 12, 0, 30, 999_999, tzinfo=UTC), "2030-01-15T12:00:30.999Z"),
        (datetime(2030, 1, 15, 12, 0, 30, 1_000, tzinfo=UTC), "2030-01-15T12:00:30.001Z"),
        (
            datetime(2030, 1, 15, 14, 0, 30, 5_000, tzinfo=timezone(timedelta(hours=2))),
            "2030-01-15T12:00:30.005Z",
        ),
        (datetime(2030, 1, 15, 23, 30, tzinfo=timezone(timedelta(hours=-1))), "2030-01-16T00:30:00.000Z"),
    ],
    ids=["whole second", "truncated not rounded", "one millisecond", "east of UTC", "west of UTC"],
)
def test_timestamps_are_rfc3339_utc_with_three_fractional_digits(instant: datetime, text: str) -> None:
    job = job_record(instant, status=JobStatus.CANCELED, cancel_requested_at=instant)

    wire = job.status_document().to_wire()

    assert wire["createdAt"] == wire["updatedAt"] == wire["cancelRequestedAt"] == text
    for key in ("createdAt", "updatedAt", "expiresAt", "cancelRequestedAt"):
        assert RFC3339_MILLIS_Z.match(wire[key]), key


class TestJobRecord:
    def test_ownership_is_tenant_and_sub(self) -> None:
        job = job_record(CREATED, tenant="acme", owner="alice")

        assert job.is_owned_by(Caller(tenant="acme", sub="alice"))
        assert not job.is_owned_by(Caller(tenant="acme", sub="bob"))
        assert not job.is_owned_by(Caller(tenant="globex", sub="alice"))
        assert job.owner_key == Caller(tenant="acme", sub="alice").owner_key

    def test_a_job_expires_at_its_expiry_instant(self) -> None:
        job = job_record(CREATED)

        assert not job.is_expired(job.expires_at - timedelta(milliseconds=1))
        assert job.is_expired(job.expires_at)

    @pytest.mark.parametrize("status", list(JobStatus), ids=lambda s: s.value)
    def test_is_terminal_follows_the_lifecycle(self, status: JobStatus) -> None:
        expected = status in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELED}

        assert job_record(CREATED, status=status).is_terminal is expected
