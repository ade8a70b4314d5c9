"""The command line's documents over the local stack: `documents upload` prints the id once Ready,
`submit --document` and `submit --file report.pdf` run jobs on documents, `documents list|show|delete`
(DESIGN.md, "Documents": clients)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from outlast.cli.errors import ExitCode
from outlast.client import ApiError, Client
from tests.support import documents as files
from tests.support.cli import run
from tests.support.local_stack import RunningStack, unique


def _until_unpinned(delete: Callable[[], str | None], timeout_seconds: float = 30) -> None:
    """Delete once the job's terminal write has been unpinned (the notifier's part, just after the
    job ends): `delete` answers None, or what refused it (which must be document_in_use)."""
    deadline = time.monotonic() + timeout_seconds
    while (refusal := delete()) is not None:
        assert "document_in_use" in refusal, refusal
        assert time.monotonic() < deadline, "the document stayed pinned after its job ended"
        time.sleep(0.2)


@pytest.fixture
def signed_in(stack: RunningStack, monkeypatch: pytest.MonkeyPatch) -> RunningStack:
    monkeypatch.setenv("OUTLAST_TOKEN", stack.token(unique("cli-docs"), "cli-docs"))
    monkeypatch.setenv("OUTLAST_API_URL", stack.url)
    return stack


def test_upload_then_summarize_the_document_then_delete_it(signed_in: RunningStack, tmp_path: Path) -> None:
    report = tmp_path / "report.pdf"
    report.write_bytes(files.pdf(files.numbered_pages(2)))

    code, out, err = run("documents", "upload", str(report))
    assert code == ExitCode.OK, err
    document_id = out.strip()
    assert "uploaded" in err

    code, out, err = run("submit", "summarize", "--document", document_id, "--wait")
    assert code == ExitCode.OK, err
    assert out.strip()

    code, out, err = run("documents", "show", document_id, "--json")
    assert code == ExitCode.OK, err
    shown = json.loads(out)
    assert shown["status"] == "Ready"
    assert shown["ready"]["pages"] == 2
    code, out, _ = run("documents", "list")
    assert document_id in out

    def delete() -> str | None:
        code, _, err = run("documents", "delete", document_id)
        return None if code == ExitCode.OK else err

    _until_unpinned(delete)
    code, _, err = run("documents", "show", document_id)
    assert code == ExitCode.ERROR
    assert "document_not_found" in err or "404" in err


def test_submit_with_a_pdf_file_uploads_it_and_runs_the_job(signed_in: RunningStack, tmp_path: Path) -> None:
    report = tmp_path / "quarterly.pdf"
    report.write_bytes(files.pdf(["Revenue rose by a tenth.", "Costs held."]))

    code, out, err = run("submit", "summarize", "--file", str(report), "--wait")

    assert code == ExitCode.OK, err
    assert out.strip()
    assert "document " in err


def test_a_rejected_upload_exits_1_with_its_code(signed_in: RunningStack, tmp_path: Path) -> None:
    locked = tmp_path / "locked.pdf"
    locked.write_bytes(files.pdf(["secret"], password="pw"))

    code, _, err = run("documents", "upload", str(locked))

    assert code == ExitCode.FAILED
    assert "document_encrypted" in err


def test_a_foreign_cursor_or_document_is_an_error(signed_in: RunningStack) -> None:
    code, _, err = run("documents", "list", "--cursor", "not-a-cursor")
    assert code == ExitCode.ERROR
    assert "invalid_cursor" in err

    code, _, err = run("documents", "delete", "0b8f6c1e-2a4d-4e7b-9c3f-5d6e7f8a9b0c")
    assert code == ExitCode.ERROR
    assert "document_not_found" in err


def test_an_unknown_type_is_a_usage_error(signed_in: RunningStack, tmp_path: Path) -> None:
    image = tmp_path / "photo.png"
    image.write_bytes(b"\x89PNG")

    code, _, err = run("documents", "upload", str(image))

    assert code == ExitCode.ERROR
    assert ".pdf" in err


def test_the_python_client_uploads_and_runs_a_job_on_a_document(stack: RunningStack, tmp_path: Path) -> None:
    client = Client(stack.url, token=stack.token(unique("client-docs"), "cli-docs"))
    notes = tmp_path / "notes.md"
    notes.write_text(files.MARKDOWN)

    document = client.upload_document(notes, timeout=60)
    assert document.status == "Ready"
    job = client.submit("summarize", document_id=document.document_id)
    done = client.wait(job.job_id, timeout=90)

    assert done.status == "Succeeded"
    assert client.result(job.job_id).output

    def delete() -> str | None:
        try:
            client.delete_document(document.document_id)
        except ApiError as error:
            return error.code
        return None

    _until_unpinned(delete)
    with pytest.raises(ApiError) as gone:
        client.document(document.document_id)
    assert gone.value.code == "document_not_found"
