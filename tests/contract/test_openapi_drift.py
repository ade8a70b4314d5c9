"""The committed OpenAPI document is exactly what the code generates (`make openapi` refreshes it)."""

from __future__ import annotations

from pathlib import Path

from outlast.openapi import build_document, render

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_committed_document_matches_the_code() -> None:
    assert DOCUMENT.read_text() == render(), "docs/openapi.json is stale: run `make openapi` and commit it"


def test_every_route_of_the_contract_is_documented() -> None:
    paths = build_document()["paths"]
    assert set(paths) == {
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/result",
        "/v1/jobs/{job_id}/output",
        "/v1/jobs/{job_id}/cancellation",
        "/v1/realtime/tickets",
        "/v1/budget",
        "/v1/documents",
        "/v1/documents/{document_id}",
    }
    assert set(paths["/v1/jobs"]) == {"get", "post"}
    assert set(paths["/v1/budget"]) == {"get"}
    assert set(paths["/v1/documents"]) == {"get", "post"}
    assert set(paths["/v1/documents/{document_id}"]) == {"get", "delete"}


def test_a_document_type_outside_the_list_is_a_documented_415() -> None:
    answers = build_document()["paths"]["/v1/documents"]["post"]["responses"]

    assert "unsupported_document_type" in answers["415"]["description"]
    assert "document_too_large" in answers["413"]["description"]


def test_a_budget_refusal_is_a_documented_403_without_retry_after() -> None:
    answers = build_document()["paths"]["/v1/jobs"]["post"]["responses"]

    assert "budget_exceeded" in answers["403"]["description"]
    assert "application/problem+json" in answers["403"]["content"]
    assert "headers" not in answers["403"]


def test_no_status_is_documented_that_the_code_never_sends() -> None:
    for path_item in build_document()["paths"].values():
        for operation in path_item.values():
            assert "422" not in operation["responses"]
