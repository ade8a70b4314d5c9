"""Documents in the console, in Chromium against the local stack (DESIGN.md, "Documents"): a PDF is
uploaded with the presigned POST straight to the bucket's stand-in (the upload front, which checks
the policy and the signer's role, and answers CORS from the bucket's rules for the console's
origin), read by the ingest, and summarized; a file of another type and a PDF without text are
refused with what to do, and nothing is sent in their name.

Every test runs under the console's real CSP and fails on any console error it did not declare.
"""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import FilePayload, Page, Route, expect

from infra.config import StageConfig
from outlast.documents import pdf
from tests.e2e.browser.conftest import ConsolePage
from tests.support.console import id_token, sign_in
from tests.support.local_stack import unique

pytestmark = pytest.mark.e2e

DOCUMENT_FIELD = "Or upload a document to run the job on"
MAX_DOCUMENT_BYTES: int = StageConfig.model_fields["max_document_bytes"].default  # the e2e stack's
# Records every text the document's status line shows and the upload bar's values, in order.
WATCH_DOCUMENT = """
(() => {
  window.__documentStatus = [];
  window.__uploadProgress = [];
  const status = document.getElementById('document-status');
  const bar = document.getElementById('document-progress');
  new MutationObserver(() => window.__documentStatus.push(status.textContent))
    .observe(status, {childList: true, characterData: true, subtree: true});
  new MutationObserver(() => {
    if (bar.hasAttribute('value')) window.__uploadProgress.push([bar.value, bar.max]);
  }).observe(bar, {attributes: true});
})()
"""


def _new_job(console: ConsolePage, user: str) -> Page:
    """Signed in as a new user of the tenant, on the New job screen."""
    sign_in(console.page, console.stack.console_url, unique(user), "docs-web")
    console.page.locator("#nav-submit").click()
    return console.page


def _choose(page: Page, name: str, mime_type: str, data: bytes) -> None:
    """Choose the file in the document field, as a person would."""
    page.get_by_label(DOCUMENT_FIELD).set_input_files(
        files=[FilePayload(name=name, mimeType=mime_type, buffer=data)]
    )


def _documents(console: ConsolePage) -> list[dict[str, object]]:
    answer = console.stack.call("GET", "/v1/documents", token=id_token(console.page))
    assert answer.status == 200, answer.body
    items: list[dict[str, object]] = answer.body["items"]
    return items


def test_a_pdf_uploaded_through_the_console_is_read_and_summarized(console: ConsolePage) -> None:
    marker = uuid.uuid4().hex[:12]
    report = pdf(
        [
            f"The ledger of {marker} balanced in March.\nEvery account was reconciled.",
            "The second page lists the auditors.",
        ]
    )
    page = _new_job(console, "web-docs")
    page.evaluate(WATCH_DOCUMENT)

    _choose(page, "report.pdf", "application/pdf", report)

    status = page.locator("#document-status")
    expect(status).to_contain_text("report.pdf is ready (2 pages,")
    expect(page.get_by_label("Text", exact=True)).to_be_disabled()
    seen = page.evaluate("window.__documentStatus")
    assert seen[0].startswith("Uploading report.pdf: "), seen
    assert "Uploaded report.pdf. Reading its text..." in seen, seen
    progress = page.evaluate("window.__uploadProgress")
    assert progress, "the upload bar never showed"
    assert progress[-1][0] == progress[-1][1] >= len(report), progress
    (document,) = _documents(console)
    assert document["filename"] == "report.pdf"
    assert document["status"] == "Ready"

    page.get_by_label("Operation").select_option("summarize")
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator("#submitted")).to_be_visible()
    job_id = str(page.locator("#job-rows tr").first.get_attribute("data-job-id"))
    page.locator(f'tr[data-job-id="{job_id}"] a').click()
    expect(page.locator("#job-status")).to_have_text("Succeeded")

    # The summary is of the PDF's text (the local model summarizes with its first sentences), and
    # it is the API's result for the job.
    output = page.locator("#job-output")
    expect(output).to_contain_text(f"The ledger of {marker} balanced in March.")
    expected = console.stack.call("GET", f"/v1/jobs/{job_id}/result", token=id_token(page)).body["output"]
    expect(output).to_have_text(expected)

    # Back on New job, the document is still chosen: another operation on it is one more submit.
    page.locator("#nav-submit").click()
    expect(page.locator("#document-status")).to_contain_text("report.pdf is ready")
    page.get_by_role("button", name="Use the text instead").click()
    expect(page.get_by_label("Text", exact=True)).to_be_enabled()
    expect(page.locator("#document-status")).to_have_text("")


def test_a_file_of_another_type_is_refused_before_anything_is_sent(console: ConsolePage) -> None:
    page = _new_job(console, "web-docs-type")

    _choose(page, "tool.exe", "application/octet-stream", b"MZ\x90\x00")

    failure = page.locator("#document-failure-message")
    expect(failure).to_contain_text("Unsupported file type")
    expect(failure).to_contain_text("Choose a PDF, a Word document (.docx)")
    expect(page.get_by_label("Text", exact=True)).to_be_enabled()
    assert _documents(console) == []


def test_a_pdf_without_text_shows_the_ingests_rejection_and_its_code(console: ConsolePage) -> None:
    page = _new_job(console, "web-docs-blank")

    _choose(page, "scan.pdf", "application/pdf", pdf([None, None]))

    failure = page.locator("#document-failure-message")
    expect(failure).to_contain_text("The document was rejected: document_has_no_text")
    expect(page.locator("#document-status")).to_have_text("scan.pdf cannot be used.")
    # The job falls back to the text: submit is not held for a document that cannot be used.
    expect(page.get_by_label("Text", exact=True)).to_be_enabled()
    expect(page.get_by_role("button", name="Submit job")).to_be_enabled()
    (document,) = _documents(console)
    assert document["status"] == "Rejected"


def test_a_file_over_the_largest_document_is_the_apis_413_and_nothing_is_uploaded(
    console: ConsolePage,
) -> None:
    console.expect_error(r"status of 413")
    page = _new_job(console, "web-docs-large")

    _choose(page, "big.txt", "text/plain", b"a" * (MAX_DOCUMENT_BYTES + 1))

    failure = page.locator("#document-failure-message")
    expect(failure).to_contain_text("The document is too large")
    assert _documents(console) == []


def test_an_upload_the_bucket_refuses_is_shown_and_the_document_never_becomes_ready(
    console: ConsolePage,
) -> None:
    console.expect_error(r"status of 403")
    page = _new_job(console, "web-docs-refused")

    # The form is changed on its way to name another key than its policy's: the upload front refuses
    # it as S3 would (403 AccessDenied), with the CORS headers that let the console read the refusal.
    def other_key(route: Route) -> None:
        body = route.request.post_data_buffer or b""
        route.continue_(post_data=body.replace(b"/original\r\n", b"/elsewhere\r\n", 1))

    (bucket,) = (
        name for logical_id, name in console.stack.state["buckets"].items() if "DocumentsBucket" in logical_id
    )
    page.route(lambda url: url.endswith(f"/{bucket}"), other_key)
    _choose(page, "notes.md", "text/markdown", b"# Notes\n\nA short note.\n")

    failure = page.locator("#document-failure-message")
    expect(failure).to_contain_text("The upload was refused")
    expect(failure).to_contain_text("The storage did not allow this upload.")
    (document,) = _documents(console)
    assert document["status"] == "AwaitingUpload"
