"""Tenants' running caps (DESIGN.md, "Fairness between tenants"), for operators: the functions'
own adapter on the budgets table, with the stage's default."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from shared.adapters.dynamodb_tenants import DynamoTenantSettings
from shared.slots import effective_cap


@dataclass(frozen=True)
class TenantCap:
    """One tenant's running cap: its own (None: the stage's applies) and the one its jobs get."""

    tenant: str
    configured: int | None
    effective: int  # 0: no cap


class OperatorTenants:
    """Sets and shows running caps; a cap applies to jobs submitted after it (copied at submit)."""

    def __init__(self, settings: DynamoTenantSettings, default_max_running: int) -> None:
        self._settings = settings
        self.default_max_running = default_max_running

    def show(self, tenant: str) -> TenantCap:
        """The tenant's cap as a submit would copy it now."""
        configured = self._settings.max_running(tenant)
        return TenantCap(tenant, configured, effective_cap(configured, self.default_max_running))

    def set_max_running(self, tenant: str, max_running: int | None, now: datetime) -> TenantCap:
        """The tenant's own cap (0: none; None: drop it, the stage default applies); what it is now."""
        if max_running is None:
            self._settings.clear_max_running(tenant)
        else:
            self._settings.set_max_running(tenant, max_running, now)
        return self.show(tenant)
