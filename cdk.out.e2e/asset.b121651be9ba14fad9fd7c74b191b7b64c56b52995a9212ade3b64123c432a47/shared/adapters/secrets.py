"""SecretSource through Powertools Parameters: Secrets Manager, cached in the container."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider


class CachedSecretSource:
    """Reads secrets by name or ARN; Powertools caches each for `max_age` seconds.

    The cache bounds both latency (one call per container per window) and how long a
    rotated secret takes to reach running containers.
    """

    def __init__(self, provider: SecretsProvider, max_age_seconds: int) -> None:
        self._provider = provider
        self._max_age = max_age_seconds

    def get(self, name: str) -> str:
        """The secret's current value (string secrets only)."""
        value = self._provider.get(name, max_age=self._max_age)
        if not isinstance(value, str):
            raise TypeError("expected a string secret")
        return value
