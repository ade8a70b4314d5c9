"""Settings of the WebSocket ticket authorizer."""

from pydantic import Field

from shared import resources as r
from shared.settings import EnvSettings


class AuthorizerSettings(EnvSettings):
    """Where tickets are kept."""

    connections_table: str = Field(alias=r.ENV_CONNECTIONS_TABLE, min_length=1)
