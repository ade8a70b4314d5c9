"""Browser fixtures: Debian's Chromium, headless, driven by Playwright for Python.

The browser is the system's (`/usr/bin/chromium`, installed by `.ci/run` with apt); Playwright's
own browser download (`playwright install`) is never used. Each test gets a fresh browser context
(its own cookies and storage: another user, another tab) whose console messages and page errors
are collected; a test fails on any console error it did not declare it expects.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from tests.support.local_stack import RunningStack

CHROMIUM = Path("/usr/bin/chromium")
# No sandbox (the tests run as root), and nothing that would reach the network on its own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-gpu",
    "--disable-quic",
]
VIEWPORT = {"width": 1280, "height": 720}
# What a person would wait at most for a change to show (jobs take seconds on a busy two-core
# machine); waits end as soon as the condition holds.
expect.set_options(timeout=30_000)


@dataclass
class ConsolePage:
    """One browser context's page on the console, and what its console said."""

    page: Page
    context: BrowserContext
    stack: RunningStack
    errors: list[str] = field(default_factory=list)
    expected: list[re.Pattern[str]] = field(default_factory=list)

    def expect_error(self, pattern: str) -> None:
        """Declare a console error this test provokes on purpose (e.g. a refused request)."""
        self.expected.append(re.compile(pattern))

    def unexpected_errors(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.expected)]


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as running:
        yield running


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is not installed: `apt-get install -y chromium` (.ci/run does)")
    launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
    yield launched
    launched.close()


def open_console(browser: Browser, stack: RunningStack) -> ConsolePage:
    """A new browser context (no shared storage) with a page that records console errors."""
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    context.set_default_timeout(30_000)
    page = context.new_page()
    opened = ConsolePage(page=page, context=context, stack=stack)

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            opened.errors.append(f"console: {message.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: opened.errors.append(f"pageerror: {error}"))
    return opened


@pytest.fixture
def console(browser: Browser, stack: RunningStack) -> Iterator[ConsolePage]:
    opened = open_console(browser, stack)
    yield opened
    opened.context.close()
    assert opened.unexpected_errors() == []


@pytest.fixture
def second_console(browser: Browser, stack: RunningStack) -> Iterator[ConsolePage]:
    opened = open_console(browser, stack)
    yield opened
    opened.context.close()
    assert opened.unexpected_errors() == []
