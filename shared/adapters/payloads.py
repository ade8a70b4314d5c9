"""PayloadStore on DynamoDB (small payloads, beside the job) and S3 (large payloads)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from shared import resources as r
from shared.adapters.dynamo_errors import error_code, storage_errors
from shared.adapters.dynamo_items import INPUT_SORT_VALUE, RESULT_SORT_VALUE, deserialize, job_pk, serialize
from shared.clock import epoch_seconds
from shared.errors import StorageUnavailableError
from shared.job import BlobLocation, JobInput, JobResult

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client

_BODY = "body"
# What DynamoDB and S3 answer to a conditional create of something that already exists.
_ALREADY_WRITTEN = frozenset({"ConditionalCheckFailedException", "PreconditionFailed", "412"})
# S3's answer to a conditional PUT racing another one of the same key; how often and how long to
# wait for the other write to settle (about 1.5 s in all) before answering 503.
_CONFLICT = "ConditionalRequestConflict"
_CONFLICT_RETRIES = 5
_CONFLICT_BACKOFF_SECONDS = 0.05


@dataclass(frozen=True)
class _Kind:
    """Where one kind of payload lives: its sort key and type in the table, its S3 prefix."""

    sort: str
    item_type: str
    prefix: str

    def object_key(self, job_id: str) -> str:
        return f"{self.prefix}{job_id}.json"

    def item_key(self, job_id: str) -> dict[str, Any]:
        return serialize({r.PARTITION_KEY: job_pk(job_id), r.SORT_KEY: self.sort})


_INPUT = _Kind(INPUT_SORT_VALUE, r.INPUT_ITEM_TYPE, r.INPUT_PREFIX)
_RESULT = _Kind(RESULT_SORT_VALUE, r.RESULT_ITEM_TYPE, r.RESULT_PREFIX)


class DynamoS3PayloadStore:
    """Stores each payload as JSON: in a `body` attribute of an item in the job's partition, or in S3.

    Writes are idempotent by construction (same key, same content), so a retried submit or a
    duplicate worker delivery can repeat them without harm. The S3 client is made on first use:
    most payloads are small, and creating a client costs tens of milliseconds of cold start.
    """

    def __init__(
        self, dynamodb: DynamoDBClient, s3_factory: Callable[[], S3Client], jobs_table: str, bucket: str
    ) -> None:
        self._dynamodb = dynamodb
        self._s3_factory = s3_factory
        self._jobs_table = jobs_table
        self._bucket = bucket

    @cached_property
    def _s3(self) -> S3Client:
        return self._s3_factory()

    def put_input(self, job_input: JobInput, location: BlobLocation, expires_at: datetime) -> None:
        """Store the input where `location` says (a repeat leaves the stored one alone)."""
        self._put(_INPUT, job_input.job_id, job_input.model_dump_json(), location, expires_at)

    def get_input(self, job_id: str, location: BlobLocation) -> JobInput | None:
        """The input, or None when it is gone."""
        body = self._get(_INPUT, job_id, location)
        return JobInput.model_validate_json(body) if body is not None else None

    def set_input_expiry(self, job_id: str, location: BlobLocation, at: datetime) -> None:
        """Let TTL delete the input item at `at`; S3 inputs age out by the bucket lifecycle, and an
        input in the job item ends with the job's terminal write."""
        if location != "item":
            return
        try:
            with storage_errors():
                self._dynamodb.update_item(
                    TableName=self._jobs_table,
                    Key=_INPUT.item_key(job_id),
                    UpdateExpression="SET #ttl = :ttl",
                    # Never create a stub item for an input that is already gone.
                    ConditionExpression="attribute_exists(#pk)",
                    ExpressionAttributeNames={"#ttl": r.TTL_ATTRIBUTE, "#pk": r.PARTITION_KEY},
                    ExpressionAttributeValues=serialize({":ttl": epoch_seconds(at)}),
                )
        except ClientError as error:
            if error_code(error) != "ConditionalCheckFailedException":
                raise

    def put_result(self, result: JobResult, location: BlobLocation, expires_at: datetime) -> JobResult:
        """Store the result where `location` says, unless a result is already there: then that
        one comes back, and the caller adopts its output and usage instead of its own."""
        if self._put(_RESULT, result.job_id, result.model_dump_json(), location, expires_at):
            return result
        stored = self.get_result(result.job_id, location)
        if stored is None:  # pragma: no cover - a write-once payload refused its write, so it exists
            raise StorageUnavailableError("The stored result is not readable right now.")
        return stored

    def get_result(self, job_id: str, location: BlobLocation) -> JobResult | None:
        """The result, or None when it is gone."""
        body = self._get(_RESULT, job_id, location)
        return JobResult.model_validate_json(body) if body is not None else None

    def find_result(self, job_id: str) -> tuple[BlobLocation, JobResult] | None:
        """A result an earlier claim wrote: small ones in the item, large ones in S3 (two reads
        at most, and only a job claimed before pays them)."""
        locations: tuple[BlobLocation, ...] = ("item", "s3")
        for location in locations:
            result = self.get_result(job_id, location)
            if result is not None:
                return location, result
        return None

    def _put(self, kind: _Kind, job_id: str, body: str, location: BlobLocation, expires_at: datetime) -> bool:
        if location == "job":
            raise ValueError("a payload in the job item is written with the job item")
        """Write once; True when this call wrote it. A payload never changes after it exists, so
        a repeat (a replayed submit, a second worker after a lost lease) can neither reset its
        retention nor replace it."""
        try:
            with storage_errors():
                if location == "s3":
                    self._put_object_once(kind.object_key(job_id), body)
                    return True
                item = {
                    r.TYPE_ATTRIBUTE: {"S": kind.item_type},
                    _BODY: {"S": body},
                    r.TTL_ATTRIBUTE: {"N": str(epoch_seconds(expires_at))},
                }
                self._dynamodb.put_item(
                    TableName=self._jobs_table,
                    Item={**kind.item_key(job_id), **item},
                    ConditionExpression="attribute_not_exists(#pk)",
                    ExpressionAttributeNames={"#pk": r.PARTITION_KEY},
                )
        except ClientError as error:
            if error_code(error) not in _ALREADY_WRITTEN:
                raise
            return False
        return True

    def _put_object_once(self, key: str, body: str) -> None:
        """PUT with If-None-Match. S3 answers 409 ConditionalRequestConflict while another
        conditional PUT of the key is in flight: with the same key the content is the same (a
        concurrent identical submit), so wait for that write to settle, and the retry then gets
        412 (written) or, if the other write failed, writes the object itself."""
        for attempt in range(_CONFLICT_RETRIES + 1):
            try:
                self._s3.put_object(
                    Bucket=self._bucket,
                    Key=key,
                    Body=body.encode("utf-8"),
                    ContentType="application/json",
                    IfNoneMatch="*",
                )
            except ClientError as error:
                if error_code(error) != _CONFLICT or attempt == _CONFLICT_RETRIES:
                    raise
                time.sleep(_CONFLICT_BACKOFF_SECONDS * 2**attempt)
            else:
                return

    def _get(self, kind: _Kind, job_id: str, location: BlobLocation) -> str | None:
        if location == "job":
            raise ValueError("a payload in the job item is read from the job record (JobRecord.inline_*)")
        if location == "s3":
            try:
                with storage_errors():
                    response: Any = self._s3.get_object(Bucket=self._bucket, Key=kind.object_key(job_id))
            except ClientError as error:
                if error_code(error) in {"NoSuchKey", "404"}:
                    return None
                raise
            return bytes(response["Body"].read()).decode("utf-8")
        with storage_errors():
            found = self._dynamodb.get_item(
                TableName=self._jobs_table, Key=kind.item_key(job_id), ConsistentRead=True
            )
        item = found.get("Item")
        return str(deserialize(item)[_BODY]) if item else None
