"""UploadSigner on S3: a presigned POST (SigV4) whose policy pins the key, the type and the size.

boto3 signs locally with the function's own credentials (its role's session, whose token rides
in the form), so S3 authorizes the upload as the function: its role needs s3:PutObject on the
key. The policy's conditions are what S3 enforces on the form: the exact key (boto3 adds it),
the exact Content-Type and a content-length-range of 1 to the declared size.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from shared.adapters.dynamo_errors import storage_errors
from shared.clock import Clock, truncate_to_millis
from shared.documents.ports import UploadGrant

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


class S3UploadSigner:
    """Presigns POSTs to one bucket; the S3 client (made on first use) decides the URL."""

    def __init__(self, s3_factory: Callable[[], S3Client], bucket: str, clock: Clock) -> None:
        self._s3_factory = s3_factory
        self._bucket = bucket
        self._clock = clock

    def presign(self, key: str, content_type: str, max_bytes: int, expires_in_seconds: int) -> UploadGrant:
        """generate_presigned_post with the type and the size range as conditions."""
        # Taken before signing: the policy's own expiry is a little later, never earlier.
        expires_at = truncate_to_millis(self._clock.now()) + timedelta(seconds=expires_in_seconds)
        conditions: list[Any] = [{"Content-Type": content_type}, ["content-length-range", 1, max_bytes]]
        with storage_errors():
            post = self._s3_factory().generate_presigned_post(
                Bucket=self._bucket,
                Key=key,
                Fields={"Content-Type": content_type},
                Conditions=conditions,
                ExpiresIn=expires_in_seconds,
            )
        return UploadGrant(
            url=str(post["url"]),
            fields={str(k): str(v) for k, v in post["fields"].items()},
            expires_at=expires_at,
        )
