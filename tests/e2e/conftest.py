"""End-to-end fixtures: one local stack per session, started from the synthesized template.

The CDK context gives the stack fast timings (short leases, a short dispatch grace) so that
recovery paths finish in seconds; everything else is the template exactly as deployed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from outlast.chaos.target import FAST_CONTEXT
from tests.support.local_stack import PROJECT_ROOT, RunningStack, start_stack, stop_stack

# Short leases and grace periods (the chaos driver uses the same), and the webhook retry schedule
# shrunk from 5 s ... 10 h to 1 s ... 4 s, so that seven attempts end on the DLQ within seconds.
WEBHOOK_RETRY_SCALE = "0.0001"
E2E_CONTEXT = {**FAST_CONTEXT, "webhookRetryScale": WEBHOOK_RETRY_SCALE}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def stack() -> Iterator[RunningStack]:
    running = start_stack(PROJECT_ROOT / "cdk.out.e2e", E2E_CONTEXT, ["--schedule-seconds", "2"])
    yield running
    stop_stack(running)
