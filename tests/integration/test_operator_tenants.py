"""`outlast ops tenants set | show` against moto through a stack's outputs: the cap an operator sets
is the one the submit's one budget read copies onto the tenant's next jobs."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.budgets import period_of
from tests.integration.test_operator_dlq import World, create_world

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = pytest.mark.integration

TENANT = "acme"
STAGE_DEFAULT = 8


@pytest.fixture
def world(moto_endpoint: str, resources: TestResources, capsys: pytest.CaptureFixture[str]) -> World:
    outputs = {"BudgetsTableName": resources.budgets_table, "MaxRunningPerTenant": str(STAGE_DEFAULT)}
    return create_world(moto_endpoint, resources, capsys, outputs)


def test_set_and_show_a_tenants_running_cap(world: World) -> None:
    ledger = DynamoBudgetLedger(world.dynamodb, world.resources.budgets_table)
    period = period_of(datetime.now(UTC))

    # Given a tenant on the stage default
    default = world.cli("tenants", "show", "--tenant", TENANT, "--json")
    assert default.code == 0, default.err
    assert default.document["tenant"] == {"tenant": TENANT, "maxRunning": STAGE_DEFAULT, "own": False}
    assert ledger.state(TENANT, period).configured_max_running is None

    # When on-call caps it, then lifts the cap, then drops its own
    own = world.cli("tenants", "set", "--tenant", TENANT, "--max-running", "3", "--json")
    assert own.code == 0, own.err
    assert own.document["tenant"] == {"tenant": TENANT, "maxRunning": 3, "own": True}
    # Then the submit's one budget read sees it
    assert ledger.state(TENANT, period).configured_max_running == 3

    uncapped = world.cli("tenants", "set", "--tenant", TENANT, "--uncapped", "--json")
    assert uncapped.document["tenant"] == {"tenant": TENANT, "maxRunning": 0, "own": True}
    dropped = world.cli("tenants", "set", "--tenant", TENANT, "--stage-default")
    assert dropped.code == 0
    assert ledger.state(TENANT, period).configured_max_running is None
    human = world.cli("tenants", "show", "--tenant", TENANT)
    assert f"at most {STAGE_DEFAULT} jobs running at once (the stage default)" in human.out


@pytest.mark.parametrize(
    "argv",
    [
        ("set", "--tenant", TENANT),
        ("set", "--tenant", TENANT, "--max-running", "0"),
        ("set", "--tenant", TENANT, "--max-running", "3", "--uncapped"),
        ("set", "--tenant", "bad tenant", "--max-running", "3"),
    ],
)
def test_a_cap_said_wrong_is_refused_before_any_write(world: World, argv: tuple[str, ...]) -> None:
    refused = world.cli("tenants", *argv)

    assert refused.code != 0
