"""Settings of the notifier."""

from pydantic import Field

from shared import resources as r
from shared.settings import BudgetStorageSettings


class NotifierSettings(BudgetStorageSettings):
    """Where connections are kept, the stage's management endpoint (its callback URL), where
    webhook endpoints are read (the tenant index) and their deliveries enqueued, and the budget
    ledger terminal writes settle in."""

    connections_table: str = Field(alias=r.ENV_CONNECTIONS_TABLE, min_length=1)
    connections_endpoint: str = Field(alias=r.ENV_CONNECTIONS_ENDPOINT, min_length=1)
    webhooks_table: str = Field(alias=r.ENV_WEBHOOKS_TABLE, min_length=1)
    webhooks_queue_url: str = Field(alias=r.ENV_WEBHOOKS_QUEUE_URL, min_length=1)
    documents_table: str = Field(alias=r.ENV_DOCUMENTS_TABLE, min_length=1)
