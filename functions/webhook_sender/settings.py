"""Settings of the webhook sender."""

from pydantic import Field

from shared import resources as r
from shared.settings import EnvSettings


class WebhookSenderSettings(EnvSettings):
    """The store, the queue and its DLQ, the retry schedule's scale, and the local-only egress flag."""

    webhooks_table: str = Field(alias=r.ENV_WEBHOOKS_TABLE, min_length=1)
    webhooks_queue_url: str = Field(alias=r.ENV_WEBHOOKS_QUEUE_URL, min_length=1)
    webhooks_dlq_url: str = Field(alias=r.ENV_WEBHOOKS_DLQ_URL, min_length=1)
    # 1 in AWS (`webhookRetryScale`); the e2e stack shrinks the schedule to seconds.
    retry_scale: float = Field(default=1.0, alias=r.ENV_WEBHOOK_RETRY_SCALE, gt=0, le=1)
    # Plain http and loopback receivers: the template says false, local mode alone says true.
    local_egress: bool = Field(default=False, alias=r.ENV_WEBHOOK_LOCAL_EGRESS)
