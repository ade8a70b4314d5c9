"""The console's header shows the tenant's token budget (GET /v1/budget, DESIGN.md "Web console":
budget left) and follows it: a job submitted from the console and settled when it ends moves
what is left, with no reload."""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import expect

from tests.e2e.browser.conftest import ConsolePage
from tests.support.cli import run
from tests.support.console import id_token, sign_in, submit_text
from tests.support.local_stack import unique

pytestmark = pytest.mark.e2e

LIMIT = 1_000_000


def test_the_header_shows_the_budget_left_and_follows_a_job_to_its_settlement(
    console: ConsolePage, capsys: pytest.CaptureFixture[str]
) -> None:
    page, stack = console.page, console.stack
    # Given a tenant whose operator gave it a monthly limit of its own
    tenant = f"web-budget-{uuid.uuid4().hex[:8]}"
    code, _out, err = run(
        "ops",
        "budgets",
        "set",
        "--tenant",
        tenant,
        "--monthly-tokens",
        str(LIMIT),
        "--local",
        "--port",
        str(stack.port),
    )
    assert code == 0, err

    # When one of its users signs in, the header says the whole budget is left
    sign_in(page, stack.console_url, unique("web-budget"), tenant)
    left = page.locator("#budget-left")
    expect(left).to_have_text("1,000,000 of 1,000,000 tokens left")
    expect(page.locator("#budget")).to_have_attribute(
        "aria-label",
        re.compile(r"^Token budget for \d{4}-\d{2}: 1,000,000 of 1,000,000 left, 0 used; resets "),
    )

    # And once a job submitted here has ended and been settled, it says what the job used is gone
    job_id = submit_text(page, f"The budget in the header. {uuid.uuid4()}")
    expect(page.locator(f'#job-rows tr[data-job-id="{job_id}"]')).to_have_attribute(
        "data-status", "Succeeded"
    )
    token = id_token(page)
    usage = stack.call("GET", f"/v1/jobs/{job_id}", token=token).body["usage"]
    used = usage["inputTokens"] + usage["outputTokens"]
    assert used > 0
    expect(left).to_have_text(f"{LIMIT - used:,} of 1,000,000 tokens left")
    assert stack.call("GET", "/v1/budget", token=token).body["remainingTokens"] == LIMIT - used


def test_a_tenant_without_a_limit_is_told_so_not_that_it_used_nothing(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    # Given a tenant its operator exempted from any limit: it pays no budget write, so nothing
    # counts what it uses
    tenant = f"web-unlimited-{uuid.uuid4().hex[:8]}"
    code, _out, err = run(
        "ops", "budgets", "set", "--tenant", tenant, "--unlimited", "--local", "--port", str(stack.port)
    )
    assert code == 0, err
    sign_in(page, stack.console_url, unique("web-unlimited"), tenant)
    left = page.locator("#budget-left")
    expect(left).to_have_text("No monthly token limit")

    # When a job it submits has used tokens
    job_id = submit_text(page, f"No limit in the header. {uuid.uuid4()}")
    expect(page.locator(f'#job-rows tr[data-job-id="{job_id}"]')).to_have_attribute(
        "data-status", "Succeeded"
    )
    usage = stack.call("GET", f"/v1/jobs/{job_id}", token=id_token(page)).body["usage"]
    assert usage["inputTokens"] + usage["outputTokens"] > 0

    # Then the header still says what is true: there is no limit (never "0 tokens used")
    expect(left).to_have_text("No monthly token limit")
    expect(page.locator("#budget")).to_have_attribute(
        "aria-label", re.compile(r"^No token limit for \d{4}-\d{2}: .*each job shows the tokens it used\.$")
    )


def test_signing_out_takes_the_budget_off_the_screen(console: ConsolePage) -> None:
    page, stack = console.page, console.stack
    sign_in(page, stack.console_url, unique("web-budget-out"))
    expect(page.locator("#budget")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()

    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    expect(page.locator("#budget")).to_be_hidden()
    expect(page.locator("#budget-left")).to_have_count(0)
