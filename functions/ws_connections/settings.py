"""Settings of the connections function ($connect and $disconnect)."""

from pydantic import Field

from shared import resources as r
from shared.settings import EnvSettings


class ConnectionsSettings(EnvSettings):
    """Where connections are kept, and the management endpoint that closes the oldest."""

    connections_table: str = Field(alias=r.ENV_CONNECTIONS_TABLE, min_length=1)
    connections_endpoint: str = Field(alias=r.ENV_CONNECTIONS_ENDPOINT, min_length=1)
