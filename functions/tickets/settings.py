"""Settings of the tickets function."""

from pydantic import Field

from shared import resources as r
from shared.settings import EnvSettings


class TicketsSettings(EnvSettings):
    """Where tickets are kept, and the WebSocket URL they are good for."""

    connections_table: str = Field(alias=r.ENV_CONNECTIONS_TABLE, min_length=1)
    websocket_url: str = Field(alias=r.ENV_WEBSOCKET_URL, min_length=1)
