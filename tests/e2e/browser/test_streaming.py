"""A streaming job's output in the console: the text grows on the job's screen as it is written, and
a reload in the middle shows the text so far at once, then the rest (DESIGN.md, "Streaming output")."""

from __future__ import annotations

import uuid

import pytest
from playwright.sync_api import expect

from tests.e2e.browser.conftest import ConsolePage
from tests.support.console import id_token, sign_in
from tests.support.local_stack import unique

pytestmark = pytest.mark.e2e

# Records each length the streamed text had, from the moment it is installed.
WATCH_STREAM = """
() => {
  const seen = (window.__lengths = []);
  const note = () => {
    const text = document.getElementById('job-stream');
    if (!text) return;
    const length = text.textContent.length;
    if (seen[seen.length - 1] !== length) seen.push(length);
  };
  note();
  new MutationObserver(note).observe(document.body, {subtree: true, childList: true, characterData: true});
}
"""


def _streaming_document() -> str:
    sentence = " ".join(f"word{n:02d}" for n in range(40))
    return f"Streamed {uuid.uuid4()}. {sentence}. {sentence}. [[pace:6]]"


def test_the_text_grows_as_it_is_written_and_a_reload_shows_it_so_far_then_the_rest(
    console: ConsolePage,
) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-stream"))

    # Given a streaming job submitted from the form (its screen opens)
    page.locator("#nav-submit").click()
    page.get_by_label("Text", exact=True).fill(_streaming_document())
    page.get_by_label("Show the output as it is written").check()
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator("#job-stream-box")).to_be_visible()
    page.evaluate(WATCH_STREAM)

    # Then the text grows while the job runs
    expect(page.locator("#job-stream")).not_to_have_text("", timeout=60_000)
    page.wait_for_function("() => window.__lengths.filter((n) => n > 0).length >= 3", timeout=60_000)
    expect(page.locator("#job-status")).to_have_text("Running")

    # When the page is reloaded in the middle of the stream
    before = len(page.locator("#job-stream").text_content() or "")
    page.reload()

    # Then the text so far shows at once (caught up from the API), and the rest follows
    page.wait_for_function(
        "(before) => (document.getElementById('job-stream')?.textContent.length ?? 0) >= before", arg=before
    )
    page.evaluate(WATCH_STREAM)
    expect(page.locator("#job-status")).to_have_text("Succeeded", timeout=90_000)
    expect(page.locator("#job-stream-note")).to_have_text("Complete.")
    job_id = page.url.rsplit("/", 1)[-1]
    expected = stack.call("GET", f"/v1/jobs/{job_id}/result", token=id_token(page)).body["output"]
    expect(page.locator("#job-stream")).to_have_text(expected)
    lengths = page.evaluate("window.__lengths")
    assert lengths[0] >= before, lengths
    assert len(lengths) >= 2, lengths  # it went on growing after the reload
