"""End-to-end fixtures: one local stack per session, started from the synthesized template.

The CDK context gives the stack fast timings (short leases, a short dispatch grace) so that
recovery paths finish in seconds; everything else is the template exactly as deployed.

Local mode enforces every function's role (DESIGN.md, "Deploy fidelity"): each stack the tests
start is checked for denied calls when it stops (a denial fails the run, since the same call
would fail in AWS), and the session reports how many there were.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from outlast.chaos.target import FAST_CONTEXT
from tests.support.local_stack import PROJECT_ROOT, RunningStack, start_stack, stop_stack

# The denied calls of each stack stopped so far, by the stack's name.
DENIALS = pytest.StashKey[dict[str, list[str]]]()

# Short leases and grace periods (the chaos driver uses the same), and the webhook retry schedule
# shrunk from 5 s ... 10 h to 1 s ... 4 s, so that seven attempts end on the DLQ within seconds.
WEBHOOK_RETRY_SCALE = "0.0001"
E2E_CONTEXT = {**FAST_CONTEXT, "webhookRetryScale": WEBHOOK_RETRY_SCALE}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def stack(request: pytest.FixtureRequest) -> Iterator[RunningStack]:
    running = start_stack(PROJECT_ROOT / "cdk.out.e2e", E2E_CONTEXT, ["--schedule-seconds", "2"])
    yield running
    stop_without_denials(request, running, "the session's stack")


def stop_without_denials(request: pytest.FixtureRequest, running: RunningStack, name: str) -> None:
    """Stop a stack (if it still runs), record its denied calls for the report, and fail on any."""
    if running.process.poll() is None:
        stop_stack(running)
    denials = [denial.line() for denial in running.denials()]
    request.config.stash.setdefault(DENIALS, {})[name] = denials
    assert not denials, f"local mode denied calls the functions' roles do not allow ({name}):\n" + "\n".join(
        denials
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    stacks = config.stash.get(DENIALS, {})
    if not stacks:
        return
    total = sum(len(denials) for denials in stacks.values())
    each = ", ".join(f"{name}: {len(denials)}" for name, denials in stacks.items())
    terminalreporter.write_sep("-", f"local mode IAM: {total} denied calls ({each})")
    for denials in stacks.values():
        for line in denials:
            terminalreporter.write_line(line)
