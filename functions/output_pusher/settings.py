"""Settings of the output pusher."""

from pydantic import Field

from shared import resources as r
from shared.settings import EnvSettings


class OutputPusherSettings(EnvSettings):
    """Where follows are read, and the stage's management endpoint (its callback URL)."""

    connections_table: str = Field(alias=r.ENV_CONNECTIONS_TABLE, min_length=1)
    connections_endpoint: str = Field(alias=r.ENV_CONNECTIONS_ENDPOINT, min_length=1)
