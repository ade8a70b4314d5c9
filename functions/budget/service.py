"""The budget use case: the caller's own tenant, this calendar month (UTC), in one read."""

from __future__ import annotations

from functions.budget.dependencies import BudgetDependencies
from shared.budgets import budget_document, period_of
from shared.contract import BudgetDocument
from shared.job import Caller


def read_budget(deps: BudgetDependencies, caller: Caller) -> BudgetDocument:
    """The tenant's limit (its own, or the stage's), what its ended jobs used, what running ones hold."""
    state = deps.budgets.state(caller.tenant, period_of(deps.clock.now()))
    return budget_document(state, deps.settings.default_monthly_tokens)
