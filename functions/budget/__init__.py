"""GET /v1/budget: the caller's tenant's token budget this month."""
