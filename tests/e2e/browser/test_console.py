"""The web console in Chromium against the local stack: sign-in with PKCE, live rows, progress,
cancel, isolation between users, expiry, labels and the keyboard.

Every test runs under the console's real CSP (the local console front sends CloudFront's
headers) and fails on any console error or page error it did not declare (conftest.py).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import FilePayload, expect

from tests.e2e.browser.conftest import ConsolePage
from tests.support.console import (
    WATCH_PROGRESS,
    WATCH_ROWS,
    id_token,
    local_storage,
    sign_in,
    submit_text,
    unlabelled_controls,
    wait_live,
)
from tests.support.local_stack import forge_token, token_claims, unique

pytestmark = pytest.mark.e2e

# `make screenshot` sets it to docs/console.png (the README's picture); a plain test run writes the
# picture to a temporary directory, so running the tests leaves the checkout as it was.
SCREENSHOT_VARIABLE = "OUTLAST_SCREENSHOT"


def long_document(kilobytes: int = 200) -> str:
    """Paragraphs of plain sentences, each with a one-second delay for the local model (the first
    delay directive in a call counts), so every map step takes a second and progress is seen."""
    marker = uuid.uuid4().hex
    paragraphs: list[str] = []
    index = 0
    while sum(len(p) + 2 for p in paragraphs) < kilobytes * 1024:
        sentences = " ".join(
            f"Sentence {index}.{n} of document {marker} says something plain about the ledger."
            for n in range(10)
        )
        paragraphs.append(f"[[delay:1]] {sentences}")
        index += 1
    return "\n\n".join(paragraphs)


def test_sign_in_with_pkce_keeps_the_token_in_this_tab_only(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    user = unique("web-alice")

    sign_in(page, stack.console_url, user, "acme")

    expect(page.locator("#no-jobs")).to_be_visible()
    claims = token_claims(id_token(page))
    assert claims["token_use"] == "id"
    assert claims["aud"] == stack.state["consoleClientId"]
    assert claims["custom:tenant"] == "acme"
    assert local_storage(page) == {}
    assert "code=" not in page.url  # the code left the address bar once it was used


def test_a_submitted_job_goes_pending_running_succeeded_in_its_row_without_a_reload(
    console: ConsolePage,
) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-live"))
    page.evaluate("window.__sameDocument = true")
    page.evaluate(WATCH_ROWS)

    job_id = submit_text(page, f"A short note. It is watched. [[delay:3]] {uuid.uuid4()}")
    expect(page.locator(f'tr[data-job-id="{job_id}"]')).to_have_attribute("data-status", "Succeeded")

    # Every state showed in the row, in order, and the page never reloaded (its marker survived).
    assert page.evaluate(f"window.__seen['{job_id}']") == ["Pending", "Running", "Succeeded"]
    assert page.evaluate("window.__sameDocument") is True

    # When the result is opened, it is the API's result.
    page.locator(f'tr[data-job-id="{job_id}"] a').click()
    expect(page.locator("#job-status")).to_have_text("Succeeded")
    expected = stack.call("GET", f"/v1/jobs/{job_id}/result", token=id_token(page)).body["output"]
    expect(page.locator("#job-output")).to_have_text(expected)
    expect(page.locator("#job-attempts")).to_have_text("1")


def test_a_long_document_from_a_file_shows_its_progress_bar_moving(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-long"))
    page.locator("#nav-submit").click()

    page.get_by_label("Or read the text from a file (.txt, .md)").set_input_files(
        files=[FilePayload(name="report.md", mimeType="text/markdown", buffer=long_document().encode())]
    )
    expect(page.locator("#file-note")).to_have_text("Read report.md.")
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator("#submitted")).to_be_visible()
    job_id = str(page.locator("#job-rows tr").first.get_attribute("data-job-id"))
    page.locator(f'tr[data-job-id="{job_id}"] a').click()
    page.evaluate(WATCH_PROGRESS)
    expect(page.locator("#job-status")).to_have_text("Succeeded", timeout=120_000)

    seen = [tuple(v) for v in page.evaluate("window.__progress")]
    total = seen[-1][1]
    assert total > 2, seen
    assert seen[-1] == (total, total)
    assert any(0 < done < total for done, _ in seen), f"the bar jumped from start to end: {seen}"
    assert [done for done, _ in seen] == sorted(done for done, _ in seen), seen
    expect(page.locator("#job-steps")).to_have_text(f"{total} of {total} steps")


def test_extract_takes_a_schema_from_its_example_and_shows_the_result_as_formatted_json(
    console: ConsolePage,
) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-extract"))
    page.locator("#nav-submit").click()
    expect(page.get_by_label("JSON Schema")).to_be_hidden()

    # When Extract is chosen, the schema field shows with its example, and a broken schema is
    # said at once, without a request
    page.get_by_label("Operation").select_option("extract")
    schema = page.get_by_label("JSON Schema")
    expect(schema).to_be_visible()
    example = json.loads(schema.input_value())
    assert example["additionalProperties"] is False
    page.get_by_label("Text", exact=True).fill(f"Acme invoiced the tools. {uuid.uuid4()}")
    schema.fill("{not json")
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator("#submit-failure")).to_contain_text("The schema is not a JSON object")
    schema.fill(json.dumps(example))
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator("#submitted")).to_be_visible()

    # Then the job's result is the object, shown as indented JSON
    job_id = str(page.locator("#job-rows tr").first.get_attribute("data-job-id"))
    expect(page.locator(f'tr[data-job-id="{job_id}"]')).to_have_attribute("data-status", "Succeeded")
    page.locator(f'tr[data-job-id="{job_id}"] a').click()
    result = stack.call("GET", f"/v1/jobs/{job_id}/result", token=id_token(page)).body
    assert result["outputFormat"] == "json"
    assert result["output"]["vendor"] == "Acme"
    expect(page.locator("#job-output")).to_have_text(json.dumps(result["output"], indent=2))


def test_a_slow_job_is_canceled_from_its_page(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-cancel"))
    job_id = submit_text(page, f"Slow work. [[delay:30]] {uuid.uuid4()}")
    page.locator(f'tr[data-job-id="{job_id}"] a').click()
    expect(page.locator("#job-status")).to_have_text("Running")

    page.get_by_role("button", name="Cancel job").click()

    expect(page.locator("#job-status")).to_have_text("Canceled", timeout=60_000)
    expect(page.locator("#cancel-job")).to_be_hidden()
    document = stack.call("GET", f"/v1/jobs/{job_id}", token=id_token(page)).body
    assert document["status"] == "Canceled"
    assert document["cancelRequestedAt"] is not None


def test_a_second_user_in_another_context_sees_none_of_the_first_users_jobs(
    console: ConsolePage, second_console: ConsolePage
) -> None:
    alice, bob = console.page, second_console.page
    stack = console.stack
    sign_in(alice, stack.console_url, unique("web-owner"), "acme")
    job_id = submit_text(alice, f"Private to its owner. {uuid.uuid4()}")
    expect(alice.locator(f'tr[data-job-id="{job_id}"]')).to_have_attribute("data-status", "Succeeded")

    sign_in(bob, stack.console_url, unique("web-other"), "acme")

    expect(bob.locator("#no-jobs")).to_be_visible()
    assert bob.locator("#job-rows tr").count() == 0
    # Opening the first user's job by its address is the API's 404, shown from its problem.
    second_console.expect_error(r"status of 404")
    bob.goto(f"{stack.console_url}#/jobs/{job_id}")
    expect(bob.locator("#job-failure .failure-title")).to_have_text("Job not found")
    expect(bob.locator("#job-status")).to_have_text("")
    # And a live update of the first user's job never reaches the second user's page.
    bob.goto(f"{stack.console_url}#/jobs")
    wait_live(bob)
    other = submit_text(alice, f"Also private. [[delay:2]] {uuid.uuid4()}")
    expect(alice.locator(f'tr[data-job-id="{other}"]')).to_have_attribute("data-status", "Succeeded")
    assert bob.locator("#job-rows tr").count() == 0


def test_an_expiring_token_returns_to_sign_in_when_it_expires(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-expiry"))
    # Given the same user's token, valid for a few more seconds only (signed by the local pool's key)
    now = int(time.time())
    claims = {**token_claims(id_token(page)), "iat": now, "auth_time": now, "exp": now + 8}
    page.evaluate("(t) => sessionStorage.setItem('outlast.session', JSON.stringify(t))", forge_token(claims))
    page.reload()
    expect(page.locator("#who")).to_be_visible()
    wait_live(page)

    # When it expires, the console is back on the sign-in screen and keeps no token
    expect(page.get_by_role("button", name="Sign in")).to_be_visible(timeout=20_000)
    expect(page.locator("#signin-notice")).to_have_text("Your session expired. Sign in again.")
    assert page.evaluate("sessionStorage.getItem('outlast.session')") is None
    expect(page.locator("#who")).to_be_hidden()


def test_an_expired_token_at_load_and_a_refused_token_return_to_sign_in(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-refused"))
    claims = token_claims(id_token(page))
    store = "(t) => sessionStorage.setItem('outlast.session', JSON.stringify(t))"

    # An expired token in the tab: straight to sign-in, no call made with it
    page.evaluate(store, forge_token({**claims, "exp": int(time.time()) - 60}))
    page.reload()
    expect(page.locator("#signin-notice")).to_have_text("Your session expired. Sign in again.")

    # A token the API refuses (not signed by the pool): its 401 sends the user back too
    console.expect_error(r"status of 401")
    header, payload, signature = forge_token({**claims, "exp": int(time.time()) + 600}).split(".")
    page.evaluate(store, f"{header}.{payload}.{signature[::-1]}")
    page.reload()
    expect(page.locator("#signin-notice")).to_have_text("Your session has ended. Sign in again.")
    assert page.evaluate("sessionStorage.getItem('outlast.session')") is None


def test_every_control_is_labelled_and_a_job_is_submitted_with_the_keyboard_alone(
    console: ConsolePage,
) -> None:
    page, stack = console.page, console.stack
    page.goto(stack.console_url)
    assert unlabelled_controls(page) == []

    # Sign in: Tab to the button, Enter; the sign-in form has the user name focused.
    user = unique("web-keys")
    tab_to(page, "sign-in")
    page.keyboard.press("Enter")
    expect(page.get_by_label("User name")).to_be_focused()
    assert unlabelled_controls(page) == []
    page.keyboard.type(user)
    page.keyboard.press("Tab")
    page.keyboard.type("keys-inc")
    page.keyboard.press("Enter")
    expect(page.locator("#who")).to_have_text(f"{user} (keys-inc)")
    wait_live(page)
    assert unlabelled_controls(page) == []

    # The New job form: operation, text, labels, submit, by keys only.
    tab_to(page, "nav-submit")
    page.keyboard.press("Enter")
    expect(page.get_by_label("Operation")).to_be_visible()
    assert unlabelled_controls(page) == []
    tab_to(page, "operation")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    expect(page.get_by_label("Operation")).to_have_value("classify")
    page.keyboard.press("Tab")
    page.keyboard.type(f"I love this product, it works well. {uuid.uuid4()}")
    tab_to(page, "labels")
    page.keyboard.type("positive, negative")
    assert unlabelled_controls(page) == []
    page.keyboard.press("Tab")
    expect(page.locator("#submit-job")).to_be_focused()
    page.keyboard.press("Enter")

    expect(page.locator("#submitted")).to_be_visible()
    first = page.locator("#job-rows tr").first
    expect(first).to_have_attribute("data-status", "Succeeded")
    job_id = str(first.get_attribute("data-job-id"))
    assert stack.call("GET", f"/v1/jobs/{job_id}", token=id_token(page)).body["operation"] == "classify"
    tab_to(page, "status-filter")
    assert unlabelled_controls(page) == []
    page.locator(f'tr[data-job-id="{job_id}"] a').focus()
    page.keyboard.press("Enter")
    expect(page.locator("#job-status")).to_have_text("Succeeded")
    assert unlabelled_controls(page) == []


def tab_to(page, element_id: str, limit: int = 40) -> None:
    """Press Tab until the element has the focus (as a keyboard user would)."""
    for _ in range(limit):
        if page.evaluate("document.activeElement && document.activeElement.id") == element_id:
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"#{element_id} never got the focus by Tab")


def test_a_retried_submit_reuses_its_idempotency_key(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-retry"))
    keys: list[str] = []

    def first_one_lost(route) -> None:  # the first POST never gets an answer (a network failure)
        if route.request.method != "POST":
            route.continue_()
            return
        keys.append(route.request.headers["idempotency-key"])
        if len(keys) == 1:
            route.abort("failed")
        else:
            route.continue_()

    console.expect_error(r"net::ERR_FAILED")
    page.route("**/v1/jobs", first_one_lost)
    job_id = submit_text(page, f"Retried once. {uuid.uuid4()}")

    assert len(keys) == 2, keys
    assert keys[0] == keys[1]
    listed = stack.call("GET", "/v1/jobs", token=id_token(page)).body["items"]
    assert [job["jobId"] for job in listed] == [job_id]


def test_the_job_list_screenshot(console: ConsolePage, tmp_path: Path) -> None:
    """The job list with three finished jobs; `make screenshot` keeps it as docs/console.png."""
    screenshot = Path(os.environ.get(SCREENSHOT_VARIABLE) or tmp_path / "console.png")
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, "dana", "acme")
    token = id_token(page)
    for body in (
        {
            "operation": "classify",
            "input": {"text": f"Great service. {uuid.uuid4()}"},
            "options": {"labels": ["praise", "complaint"]},
        },
        {"operation": "analyze", "input": {"text": f"Quarterly figures rose. {uuid.uuid4()}"}},
    ):
        assert stack.submit(token, body).status == 202
    submit_text(page, f"Summarize the meeting notes. {uuid.uuid4()}")
    expect(page.locator('#job-rows tr[data-status="Succeeded"]')).to_have_count(3, timeout=60_000)
    page.screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 10_000


def test_sign_out_forgets_the_session_and_ends_the_sign_in(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-out"))

    page.get_by_role("button", name="Sign out").click()

    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert page.url == stack.console_url
    assert page.evaluate("sessionStorage.getItem('outlast.session')") is None
    # Signing in again asks again (the user pool's session ended too).
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_label("User name")).to_be_visible()


def test_the_status_filter_and_the_pages_of_my_jobs(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-pages"))
    token = id_token(page)
    failed = stack.submit(
        token, {"operation": "summarize", "input": {"text": f"[[fault:content_policy]] {uuid.uuid4()}"}}
    )
    ids = [failed.body["jobId"]]
    for n in range(11):
        answer = stack.submit(
            token, {"operation": "summarize", "input": {"text": f"Page filler {n}. {uuid.uuid4()}"}}
        )
        assert answer.status == 202
        ids.append(answer.body["jobId"])
    for job_id in ids:
        stack.wait_terminal(job_id, token)
    page.reload()
    wait_live(page)

    # Ten a page, newest first; Older and Newer move between the API's pages.
    rows = page.locator("#job-rows tr")
    expect(rows).to_have_count(10)
    assert [rows.nth(i).get_attribute("data-job-id") for i in range(10)] == ids[::-1][:10]
    expect(page.locator("#newer-page")).to_be_disabled()
    page.get_by_role("button", name="Older").click()
    expect(rows).to_have_count(2)
    assert [rows.nth(i).get_attribute("data-job-id") for i in range(2)] == ids[1::-1]
    expect(page.locator("#older-page")).to_be_disabled()
    page.get_by_role("button", name="Newer").click()
    expect(rows).to_have_count(10)

    # The filter asks the API for one status.
    page.get_by_label("Status").select_option("Failed")
    expect(rows).to_have_count(1)
    assert rows.first.get_attribute("data-job-id") == failed.body["jobId"]
    rows.first.locator("a").click()
    expect(page.locator("#job-error-message .failure-title")).to_have_text("Failed: content_policy")
    expected = stack.call("GET", f"/v1/jobs/{failed.body['jobId']}", token=token).body["error"]["message"]
    expect(page.locator("#job-error-message .failure-detail")).to_have_text(expected)


def test_a_refused_submit_shows_the_problems_title_and_detail(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-413"))
    console.expect_error(r"status of 413")
    page.locator("#nav-submit").click()

    page.get_by_label("Text", exact=True).fill("a" * (1_048_576 + 1))
    page.get_by_role("button", name="Submit job").click()

    failure = page.locator("#submit-failure .failure")
    expect(failure.locator(".failure-title")).to_have_text("The input is too large")
    expect(failure.locator(".failure-detail")).to_have_text("input.text is over 1,048,576 UTF-8 bytes.")
    expect(page.get_by_role("button", name="Submit job")).to_be_enabled()
    assert "urn:outlast" not in failure.inner_text()


def test_without_the_websocket_the_rows_still_change_by_polling(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    # No ticket can be had: the console cannot open the socket and falls back to polling.
    console.expect_error(r"net::ERR_FAILED")
    page.route("**/v1/realtime/tickets", lambda route: route.abort("failed"))
    page.goto(stack.console_url)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_label("User name").fill(unique("web-poll"))
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#live")).to_have_attribute("data-mode", "polling")
    page.evaluate(WATCH_ROWS)

    job_id = submit_text(page, f"Polled, not pushed. [[delay:2]] {uuid.uuid4()}")

    expect(page.locator(f'tr[data-job-id="{job_id}"]')).to_have_attribute("data-status", "Succeeded")
    assert page.evaluate(f"window.__seen['{job_id}']")[-1] == "Succeeded"
    expect(page.locator("#live")).to_have_attribute("data-mode", "polling")


def test_the_tier_is_offered_on_submit_and_a_pair_the_stage_does_not_price_is_explained(
    console: ConsolePage,
) -> None:
    # Given a stage whose only model (gpt-4o-mini) is priced at standard and batch, not flex
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-tier"))
    console.expect_error(r"status of 400")
    page.locator("#nav-submit").click()
    sent: list[dict[str, object]] = []
    page.on(
        "request",
        lambda request: (
            sent.append(json.loads(request.post_data or "{}")) if request.method == "POST" else None
        ),
    )

    # When the user asks for flex
    page.get_by_label("Text", exact=True).fill(f"Work that can wait. {uuid.uuid4()}")
    page.get_by_label("Tier").select_option("flex")
    page.get_by_role("button", name="Submit job").click()

    # Then the body carries the tier, and the refusal says why
    failure = page.locator("#submit-failure .failure")
    expect(failure.locator(".failure-title")).to_have_text("The tier is not available for this model")
    expect(failure.locator(".failure-detail")).to_contain_text("gpt-4o-mini")
    assert [body.get("options") for body in sent if "operation" in body] == [{"tier": "flex"}]


def test_the_batch_tier_hides_streaming_and_its_job_succeeds_through_the_batch_api(
    console: ConsolePage,
) -> None:
    # Given the default model, which the price table offers at the batch tier
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-batch"))
    page.locator("#nav-submit").click()
    sent: list[dict[str, object]] = []
    page.on(
        "request",
        lambda request: (
            sent.append(json.loads(request.post_data or "{}")) if request.method == "POST" else None
        ),
    )

    # When the user picks batch, the streaming choice goes away (a batch answer arrives whole)
    page.get_by_label("Text", exact=True).fill(f"Back-office work for the batch. {uuid.uuid4()}")
    expect(page.locator("#stream-field")).to_be_visible()
    page.get_by_label("Tier").select_option("batch")
    expect(page.locator("#stream-field")).to_be_hidden()
    page.get_by_role("button", name="Submit job").click()

    # Then the body carries the tier, and the job ends Succeeded through the local Batch API
    expect(page.locator("#submitted")).to_be_visible()
    assert [body.get("options") for body in sent if "operation" in body] == [{"tier": "batch"}]
    job_id = str(page.locator("#job-rows tr").first.get_attribute("data-job-id"))
    expect(page.locator(f'tr[data-job-id="{job_id}"]')).to_have_attribute(
        "data-status", "Succeeded", timeout=90_000
    )
