"""The document record: how an upload event is judged, and what its owner sees."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.documents.extraction import TextBudget
from shared.documents.record import DocumentRejection, ReadyFacts, Upload, UploadVerdict, judge_upload
from shared.documents.types import DocumentStatus, RejectCode
from shared.errors import DocumentRejectedError
from tests.document_fakes import document_record

MAX = 25 * 1024 * 1024
UPLOAD = Upload(etag="etag-1", bytes=1000)


@pytest.mark.parametrize(
    ("document", "verdict"),
    [
        pytest.param(None, UploadVerdict.NO_DOCUMENT, id="no-document"),
        pytest.param(document_record(declared_bytes=1000), UploadVerdict.INGEST, id="awaiting"),
        pytest.param(
            document_record(declared_bytes=1000, upload=UPLOAD), UploadVerdict.INGEST, id="taken-by-it"
        ),
        pytest.param(
            document_record(upload=Upload(etag="etag-0", bytes=5)), UploadVerdict.TAKEN, id="taken-by-another"
        ),
        pytest.param(document_record(declared_bytes=999), UploadVerdict.REJECT_TOO_LARGE, id="over-declared"),
        pytest.param(
            document_record(status=DocumentStatus.READY, upload=UPLOAD), UploadVerdict.SETTLED, id="ready"
        ),
        pytest.param(document_record(status=DocumentStatus.REJECTED), UploadVerdict.SETTLED, id="rejected"),
    ],
)
def test_an_upload_event_is_judged_from_the_document_as_read(document, verdict):
    assert judge_upload(document, UPLOAD, MAX) is verdict


def test_the_stages_maximum_holds_whatever_was_declared():
    document = document_record(declared_bytes=10_000)

    assert judge_upload(document, UPLOAD, max_document_bytes=999) is UploadVerdict.REJECT_TOO_LARGE


def test_the_owners_view_of_a_ready_document():
    ready = ReadyFacts(pages=3, bytes=1000, text_bytes=420, sha256="ab" * 32)
    document = document_record(
        status=DocumentStatus.READY, upload=UPLOAD, ready=ready, pinned_by=frozenset({"a", "b"})
    )

    wire = document.status_document().to_wire()

    assert wire["status"] == "Ready"
    assert wire["ready"] == {"pages": 3, "bytes": 1000, "textBytes": 420, "sha256": "ab" * 32}
    assert wire["error"] is None
    assert wire["bytes"] == document.declared_bytes
    # Nothing of how it is stored: no key, no ETag, no pins
    assert not {"upload", "uploadEtag", "pins", "owner", "sequenceId"} & wire.keys()
    assert "etag-1" not in str(wire)


def test_the_owners_view_of_a_rejected_document():
    error = DocumentRejection(code=RejectCode.DOCUMENT_ENCRYPTED, message="The PDF is encrypted.")
    document = document_record(status=DocumentStatus.REJECTED, upload=UPLOAD, error=error)

    wire = document.status_document().to_wire()

    assert (wire["status"], wire["ready"]) == ("Rejected", None)
    assert wire["error"] == {"code": "document_encrypted", "message": "The PDF is encrypted."}


def test_a_text_budget_counts_its_separators():
    budget = TextBudget(max_bytes=7, separator="\n\n")
    budget.add("abc")
    budget.add("de")  # 3 + 2 + 2 = 7

    with pytest.raises(DocumentRejectedError) as raised:
        budget.add("")  # + 2 more for the separator
    assert raised.value.code is RejectCode.DOCUMENT_TOO_LARGE
    assert budget.text() == "abc\n\nde"


def test_a_text_budget_of_whitespace_is_no_text():
    budget = TextBudget(max_bytes=100, separator="\n")
    budget.add("  ")
    budget.add("\t")

    with pytest.raises(DocumentRejectedError) as raised:
        budget.text()
    assert raised.value.code is RejectCode.DOCUMENT_HAS_NO_TEXT


def test_a_document_takes_jobs_until_its_expiry_and_its_pins_keep_it_past_it():
    document = document_record()
    kept = document.expires_at + timedelta(days=20)
    pinned = document.model_copy(update={"pinned_by": frozenset({"job-1"}), "kept_until": kept})
    after = document.expires_at + timedelta(days=1)

    assert document.takes_jobs(document.expires_at - timedelta(seconds=1))
    assert not pinned.takes_jobs(document.expires_at)  # a pin keeps it, for its jobs only
    assert (document.is_expired(after), pinned.is_expired(after), pinned.is_expired(kept)) == (
        True,
        False,
        True,
    )
    assert pinned.lives_until == kept
    # Unpinned, a kept document is gone in code at its expiry, whatever its TTL says.
    assert pinned.model_copy(update={"pinned_by": frozenset()}).is_expired(after)
    # A pin within the retention changes nothing.
    early = document.model_copy(update={"kept_until": document.expires_at - timedelta(days=1)})
    assert early.lives_until == document.expires_at
