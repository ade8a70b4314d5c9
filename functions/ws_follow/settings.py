"""Settings of the follow function (the `follow` and `unfollow` routes)."""

from pydantic import Field

from shared import resources as r
from shared.settings import EnvSettings


class FollowSettings(EnvSettings):
    """Where jobs are read (the owner check), follows written, events replayed from, and the stage's
    management endpoint the replay posts to."""

    jobs_table: str = Field(alias=r.ENV_JOBS_TABLE, min_length=1)
    output_events_table: str = Field(alias=r.ENV_OUTPUT_EVENTS_TABLE, min_length=1)
    connections_table: str = Field(alias=r.ENV_CONNECTIONS_TABLE, min_length=1)
    connections_endpoint: str = Field(alias=r.ENV_CONNECTIONS_ENDPOINT, min_length=1)
