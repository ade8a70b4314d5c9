"""The notifier's settlement from stream records (functions.notifier.settlement), on the fake ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from functions.notifier.settlement import settle_record, terminal_job, unpin_record
from shared import resources as r
from shared.adapters.dynamo_items import job_to_item
from shared.budgets import ReservationRef, new_reservation
from shared.documents.types import DocumentStatus
from shared.job import BudgetHold, Caller, JobRecord, Usage
from shared.lifecycle import JobStatus
from tests.budget_fakes import InMemoryBudgetLedger
from tests.document_fakes import InMemoryDocumentRepository, document_record
from tests.fakes import job_record

NOW = datetime(2030, 1, 31, 23, 59, tzinfo=UTC)
HOLD = BudgetHold(period="2030-01", tokens=5_000)


def _record(job: JobRecord, kind: str, event_name: str = "MODIFY", sequence: int = 1) -> dict[str, Any]:
    image = job_to_item(job, sweep_at=None)
    image[r.WRITE_KIND_ATTRIBUTE] = {"S": kind}
    return {"eventName": event_name, "dynamodb": {"NewImage": image, "SequenceNumber": f"{sequence:021d}"}}


@pytest.fixture
def ledger() -> InMemoryBudgetLedger:
    return InMemoryBudgetLedger()


def _reserved_job(ledger: InMemoryBudgetLedger, hold: BudgetHold = HOLD) -> JobRecord:
    job = job_record(NOW, tenant="acme", budget=hold)
    reservation = new_reservation(
        "acme",
        ReservationRef(job.job_id, hold.run),
        hold.tokens,
        now=NOW,
        period=hold.period,
        held_until=NOW + timedelta(hours=24),
        grace=timedelta(minutes=15),
        base_tokens=hold.base_tokens,
    )
    ledger.reserve(reservation, 1_000_000)
    return job


def test_a_terminal_write_settles_once_however_often_it_is_delivered(ledger: InMemoryBudgetLedger) -> None:
    # Given a job that reserved in January and failed in February after reporting some usage
    job = _reserved_job(ledger)
    failed = job.model_copy(
        update={
            "status": JobStatus.FAILED,
            "usage": Usage(input_tokens=1_000, output_tokens=0),
            "revision": 4,
        }
    )
    record = _record(failed, "terminal")

    # When the record arrives three times (a duplicate delivery and a retried batch)
    for _ in range(3):
        settle_record(ledger, record)

    # Then January is settled once: nothing reserved, its usage used, February untouched
    counter = ledger.counter("acme", "2030-01")
    assert (counter.used, counter.reserved) == (1_000, 0)
    assert ledger.writes == ["reserve", "settle"]
    assert ledger.counter("acme", "2030-02").used == 0


@pytest.mark.parametrize("kind", ["submit", "claim", "progress", "release", "cancel", "redrive", "bump"])
def test_writes_that_end_nothing_settle_nothing(ledger: InMemoryBudgetLedger, kind: str) -> None:
    job = _reserved_job(ledger)
    status = JobStatus.CANCELLATION_REQUESTED if kind == "cancel" else JobStatus.RUNNING

    settle_record(ledger, _record(job.model_copy(update={"status": status}), kind))

    assert ledger.writes == ["reserve"]


def test_a_job_without_a_hold_costs_no_budget_call(ledger: InMemoryBudgetLedger) -> None:
    settle_record(ledger, _record(job_record(NOW, status=JobStatus.SUCCEEDED), "terminal"))

    assert (ledger.writes, ledger.reads) == ([], [])


def test_other_items_and_removes_are_not_jobs(ledger: InMemoryBudgetLedger) -> None:
    job = _reserved_job(ledger).model_copy(update={"status": JobStatus.SUCCEEDED})
    removed = _record(job, "terminal", event_name="REMOVE")
    not_a_job = _record(job, "terminal")
    not_a_job["dynamodb"]["NewImage"][r.TYPE_ATTRIBUTE] = {"S": r.RESULT_ITEM_TYPE}

    assert terminal_job(removed) is None
    assert terminal_job(not_a_job) is None
    assert (
        terminal_job(
            {"eventName": "MODIFY", "dynamodb": {"NewImage": {"type": {"S": "job"}, "w": {"S": "terminal"}}}}
        )
        is None
    )


def test_a_redriven_run_settles_its_own_reservation(ledger: InMemoryBudgetLedger) -> None:
    # Given a job whose first run settled 300, redriven (run 3) with a reservation of its own
    hold = BudgetHold(period="2030-01", tokens=4_000, base_tokens=300, run=3)
    job = _reserved_job(ledger, hold)
    ended = job.model_copy(
        update={
            "status": JobStatus.SUCCEEDED,
            "usage": Usage(input_tokens=700, output_tokens=100),
            "redrive_count": 3,
        }
    )

    settle_record(ledger, _record(ended, "terminal"))

    assert ledger.counter("acme", "2030-01").used == 500  # 800 in all, less the 300 run 0 settled
    assert ledger.reservations == {}


def test_a_terminal_write_of_a_job_on_a_document_unpins_it_once() -> None:
    documents = InMemoryDocumentRepository()
    job = job_record(NOW, tenant="acme")
    owner = Caller(tenant=job.tenant, sub=job.owner)
    document = document_record(owner, status=DocumentStatus.READY, pinned_by=frozenset({job.job_id, "other"}))
    documents.create(document)
    on_document = job.model_copy(update={"document_id": document.document_id, "document_sha256": "0" * 64})

    unpin_record(documents, _record(on_document.model_copy(update={"status": JobStatus.RUNNING}), "claim"))
    assert documents.get(owner, document.document_id).pinned_by == {job.job_id, "other"}  # type: ignore[union-attr]

    terminal = _record(on_document.model_copy(update={"status": JobStatus.SUCCEEDED}), "terminal")
    unpin_record(documents, terminal)
    unpin_record(documents, terminal)  # redelivered
    assert documents.get(owner, document.document_id).pinned_by == {"other"}  # type: ignore[union-attr]


def test_a_terminal_write_of_a_job_on_text_touches_no_document() -> None:
    documents = InMemoryDocumentRepository()

    unpin_record(
        documents, _record(job_record(NOW).model_copy(update={"status": JobStatus.FAILED}), "terminal")
    )

    assert documents.writes == []
