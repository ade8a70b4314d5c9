"""DocumentObjects on S3: a document's uploaded file and its extracted text, side by side.

The original is read with `If-Match` on the ETag its upload event named: a later upload to
the same key (its presigned POST is good for some minutes) can replace the object, and only
the bytes the ingest took may become the document's text. The text is stored as UTF-8 with its
SHA-256 in the object's metadata and as S3's own checksum, so S3 refuses a corrupted write.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from shared.adapters.dynamo_errors import error_code, storage_errors
from shared.documents.keys import DocumentPart, object_key
from shared.errors import OriginalChangedError, OriginalMissingError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from shared.documents.record import Upload
    from shared.job import Caller

TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"
SHA256_METADATA = "sha256"
_MISSING = frozenset({"NoSuchKey", "404"})
_CHANGED = frozenset({"PreconditionFailed", "412"})


class S3DocumentObjects:
    """The documents bucket; the S3 client is made on first use (injected as a factory)."""

    def __init__(self, s3_factory: Callable[[], S3Client], bucket: str) -> None:
        self._s3_factory = s3_factory
        self._bucket = bucket

    def read_original(self, owner: Caller, document_id: str, upload: Upload) -> bytes:
        """GetObject of exactly that upload (If-Match its ETag)."""
        key = object_key(owner, document_id, DocumentPart.ORIGINAL)
        try:
            with storage_errors():
                response: Any = self._s3_factory().get_object(
                    Bucket=self._bucket, Key=key, IfMatch=_quoted(upload.etag)
                )
        except ClientError as error:
            if error_code(error) in _MISSING:
                raise OriginalMissingError(key) from None
            if error_code(error) in _CHANGED:
                raise OriginalChangedError(key) from None
            raise
        with storage_errors():
            return bytes(response["Body"].read())

    def put_text(self, owner: Caller, document_id: str, text: bytes, sha256: str) -> None:
        """PutObject of the text beside the original. Not conditional: only the upload the ingest
        took is ever extracted, so a repeat (a redelivered event) writes the same bytes."""
        with storage_errors():
            self._s3_factory().put_object(
                Bucket=self._bucket,
                Key=object_key(owner, document_id, DocumentPart.TEXT),
                Body=text,
                ContentType=TEXT_CONTENT_TYPE,
                Metadata={SHA256_METADATA: sha256},
                ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256)).decode("ascii"),
            )

    def read_text(self, owner: Caller, document_id: str) -> bytes | None:
        """GetObject of the text; None when there is none."""
        try:
            with storage_errors():
                response: Any = self._s3_factory().get_object(
                    Bucket=self._bucket, Key=object_key(owner, document_id, DocumentPart.TEXT)
                )
        except ClientError as error:
            if error_code(error) in _MISSING:
                return None
            raise
        with storage_errors():
            return bytes(response["Body"].read())

    def delete(self, owner: Caller, document_id: str) -> None:
        """DeleteObject of the original and of the text (S3 answers 204 for a missing key too)."""
        for part in DocumentPart:
            with storage_errors():
                self._s3_factory().delete_object(
                    Bucket=self._bucket, Key=object_key(owner, document_id, part)
                )


def _quoted(etag: str) -> str:
    """An ETag as HTTP conditions spell it: S3's events give it bare, its headers quoted."""
    return etag if etag.startswith('"') else f'"{etag}"'
