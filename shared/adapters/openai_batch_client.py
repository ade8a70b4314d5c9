"""The Batch API adapter over an SDK client made on first use (the batcher's and the poller's)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from shared.adapters.openai_batches import OpenAIBatchApi
from shared.lazy import once
from shared.settings import BatchProviderSettings

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient


def batch_api_on_first_use(
    settings: BatchProviderSettings, secrets_client: Callable[[], SecretsManagerClient]
) -> Callable[[], OpenAIBatchApi]:
    """A builder of the adapter: the key is read (Secrets Manager, cached as the worker caches it) and
    the SDK imported when a batch first needs them."""

    def build() -> OpenAIBatchApi:
        import openai  # noqa: PLC0415 - the SDK is imported by the first batch that needs it
        from aws_lambda_powertools.utilities.parameters import SecretsProvider  # noqa: PLC0415

        from shared.adapters.secrets import CachedSecretSource  # noqa: PLC0415

        secrets = CachedSecretSource(
            SecretsProvider(boto3_client=secrets_client()), settings.secret_max_age_seconds
        )
        # The SDK's own retries: a Batch API request is a read, a cancel, or a create whose batch is
        # recorded next (functions.batcher.service).
        sdk = openai.OpenAI(
            api_key=secrets.get(settings.openai_secret),
            base_url=settings.openai_base_url,
            timeout=settings.provider_timeout_seconds,
            max_retries=2,
        )
        return OpenAIBatchApi(sdk)

    # Its own lock: building makes the secrets client, which is made under the clients' lock.
    return once(build, threading.Lock())
