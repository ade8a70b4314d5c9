"""The composition root of the budget function."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import boto3

from functions.budget.settings import BudgetApiSettings
from shared.adapters.dynamodb_budgets import DynamoBudgetLedger
from shared.budget_ports import BudgetLedger
from shared.clock import Clock, SystemClock


@dataclass(frozen=True)
class BudgetDependencies:
    """The ledger and the clock (which period is the current one)."""

    settings: BudgetApiSettings
    budgets: BudgetLedger
    clock: Clock


@cache
def build_dependencies(settings: BudgetApiSettings) -> BudgetDependencies:
    """Create the DynamoDB client once per container."""
    return BudgetDependencies(
        settings=settings,
        budgets=DynamoBudgetLedger(boto3.client("dynamodb"), settings.budgets_table),
        clock=SystemClock(),
    )
