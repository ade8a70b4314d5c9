"""The Python client's API types are generated from docs/openapi.json and committed
(outlast/api/models.py): they must be exactly what datamodel-code-generator makes of the
document, and they must read the documents the functions' own models write."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from outlast.api import models
from outlast.openapi import generate_models
from shared.contract import ErrorDocument, Operation, ProgressDocument, StatusDocument, UsageDocument
from shared.lifecycle import JobStatus

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "outlast" / "api" / "models.py"


def test_committed_client_models_match_the_openapi_document(tmp_path: Path) -> None:
    generated = tmp_path / "models.py"

    generate_models(ROOT / "docs" / "openapi.json", generated)

    assert generated.read_text() == MODELS.read_text(), (
        "outlast/api/models.py is stale: run `make openapi` and commit it"
    )


def test_the_client_reads_what_the_status_function_writes() -> None:
    at = datetime(2030, 1, 15, 12, 0, 5, 250_000, tzinfo=UTC)
    written = StatusDocument(
        job_id="0b7f3c1e-8a4d-4e2b-9c6f-1d2e3f4a5b6c",
        status=JobStatus.FAILED,
        operation=Operation.CLASSIFY,
        created_at=at,
        updated_at=at,
        expires_at=at,
        attempts=2,
        crashes=0,
        revision=7,
        progress=ProgressDocument(completed_steps=1, total_steps=1),
        cancel_requested_at=None,
        result_url=None,
        error=ErrorDocument(code="content_policy", message="Refused."),
        usage=UsageDocument(input_tokens=12, output_tokens=0),
        reserved_tokens=None,
    ).to_wire()

    read = models.StatusDocument.model_validate(written)

    assert (read.job_id, read.status, read.operation) == (written["jobId"], "Failed", "classify")
    assert read.revision == 7
    assert read.created_at == at
    assert read.error is not None
    assert read.error.code == "content_policy"
    assert read.model_dump(mode="json", by_alias=True).keys() == written.keys()
