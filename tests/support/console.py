"""Driving the web console in a browser: sign in as a person would, read what the page shows."""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import Page, expect

# Every control on the page with its accessible name's source: a <label>, aria-label(ledby), or
# (buttons, links) its own text. Hidden inputs carry no name; a control without one is returned.
UNLABELLED_CONTROLS = """
() => [...document.querySelectorAll('input, select, textarea, button')]
  .filter((el) => el.type !== 'hidden')
  .filter((el) => {
    const labelled = (el.labels && el.labels.length > 0) || el.getAttribute('aria-label')
      || (el.getAttribute('aria-labelledby') || '').split(' ')
        .some((id) => id && document.getElementById(id));
    const text = el.tagName === 'BUTTON' && el.textContent.trim() !== '';
    return !(labelled || text);
  })
  .map((el) => el.outerHTML.slice(0, 120))
"""

# Records each status every job row shows, in order, by job id, from the moment it is installed;
# the console changes screens without reloading, so one install watches the whole session.
WATCH_ROWS = """
() => {
  const seen = (window.__seen = {});
  const note = () => {
    for (const row of document.querySelectorAll('tr[data-job-id]')) {
      const list = (seen[row.dataset.jobId] = seen[row.dataset.jobId] || []);
      if (list[list.length - 1] !== row.dataset.status) list.push(row.dataset.status);
    }
  };
  new MutationObserver(note).observe(document.body, {subtree: true, childList: true, attributes: true});
}
"""


# Records each value of the job page's progress bar.
WATCH_PROGRESS = """
() => {
  const seen = (window.__progress = []);
  const note = () => {
    const bar = document.getElementById('job-progress');
    if (!bar) return;
    const value = [bar.value, bar.max];
    const last = seen[seen.length - 1];
    if (!last || last[0] !== value[0] || last[1] !== value[1]) seen.push(value);
  };
  note();
  new MutationObserver(note).observe(document.body, {subtree: true, childList: true, attributes: true});
}
"""


def sign_in(page: Page, console_url: str, user: str, tenant: str | None = None) -> None:
    """From the console's sign-in screen through the local /oauth2/authorize form and back."""
    page.goto(console_url)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_label("User name").fill(user)
    if tenant is not None:
        page.get_by_label("Tenant (optional)").fill(tenant)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who")).to_have_text(f"{user} ({tenant})" if tenant else user)
    wait_live(page)


def wait_live(page: Page) -> None:
    """Until the console says its WebSocket is open."""
    expect(page.locator("#live")).to_have_attribute("data-mode", "live")


def id_token(page: Page) -> str:
    """The ID token the console keeps (sessionStorage of this tab)."""
    raw = page.evaluate("sessionStorage.getItem('outlast.session')")
    assert raw is not None, "the console keeps no session"
    return str(json.loads(raw))


def local_storage(page: Page) -> dict[str, Any]:
    """Everything in localStorage (the console must keep nothing there)."""
    items: dict[str, Any] = page.evaluate("Object.fromEntries(Object.entries(localStorage))")
    return items


def unlabelled_controls(page: Page) -> list[str]:
    """Form controls of the current page that have no label."""
    found: list[str] = page.evaluate(UNLABELLED_CONTROLS)
    return found


def submit_text(page: Page, text: str, operation: str = "summarize", labels: str | None = None) -> str:
    """Submit through the New job form; the job id of the row the list then shows first."""
    page.locator("#nav-submit").click()
    page.get_by_label("Operation").select_option(operation)
    page.get_by_label("Text", exact=True).fill(text)
    if labels is not None:
        page.get_by_label("Labels").fill(labels)
    page.get_by_role("button", name="Submit job").click()
    expect(page.locator("#submitted")).to_be_visible()
    return str(page.locator("#job-rows tr").first.get_attribute("data-job-id"))
