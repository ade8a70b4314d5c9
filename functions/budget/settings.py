"""Settings of the budget function."""

from shared.settings import BudgetPolicySettings


class BudgetApiSettings(BudgetPolicySettings):
    """The budget ledger, and the stage's limit for tenants without one of their own."""
