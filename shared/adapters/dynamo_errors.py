"""Turns botocore's ClientError into domain errors, by error code (never by message text)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import ClientError, ConnectionError, ReadTimeoutError

from shared.errors import StorageUnavailableError

# Codes that mean "try again later", not "this request is wrong".
RETRYABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "SlowDown",
        "TransactionConflictException",
        # S3: a conditional PUT (If-None-Match) raced another write of the key; AWS says retry.
        "ConditionalRequestConflict",
    }
)


def error_code(error: ClientError) -> str:
    """The AWS error code of a ClientError."""
    return str(error.response.get("Error", {}).get("Code", ""))


@contextmanager
def storage_errors() -> Iterator[None]:
    """Re-raise transient AWS failures as StorageUnavailableError; anything else stays a bug."""
    try:
        yield
    except ClientError as error:
        if error_code(error) in RETRYABLE_CODES:
            raise StorageUnavailableError("Storage is busy; retry shortly.") from error
        raise
    except (ConnectionError, ReadTimeoutError) as error:
        raise StorageUnavailableError("Storage did not answer; retry shortly.") from error
