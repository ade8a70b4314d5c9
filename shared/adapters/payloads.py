"""PayloadStore on DynamoDB (small payloads, beside the job) and S3 (large payloads)."""

from __future__ import annotations

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
from shared.job import BlobLocation, JobInput, JobResult

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client

_BODY = "body"
# What DynamoDB and S3 answer to a conditional create of something that already exists.
_ALREADY_WRITTEN = frozenset({"ConditionalCheckFailedException", "PreconditionFailed", "412"})


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
        """Store the input where `location` says."""
        self._put(_INPUT, job_input.job_id, job_input.model_dump_json(), location, expires_at)

    def get_input(self, job_id: str, location: BlobLocation) -> JobInput | None:
        """The input, or None when it is gone."""
        body = self._get(_INPUT, job_id, location)
        return JobInput.model_validate_json(body) if body is not None else None

    def set_input_expiry(self, job_id: str, location: BlobLocation, at: datetime) -> None:
        """Let TTL delete the input item at `at`; S3 inputs age out by the bucket lifecycle."""
        if location == "s3":
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

    def put_result(self, result: JobResult, location: BlobLocation, expires_at: datetime) -> None:
        """Store the result where `location` says."""
        self._put(_RESULT, result.job_id, result.model_dump_json(), location, expires_at)

    def get_result(self, job_id: str, location: BlobLocation) -> JobResult | None:
        """The result, or None when it is gone."""
        body = self._get(_RESULT, job_id, location)
        return JobResult.model_validate_json(body) if body is not None else None

    def _put(self, kind: _Kind, job_id: str, body: str, location: BlobLocation, expires_at: datetime) -> None:
        """Write once: a payload never changes after it exists, so a repeat (a replayed submit, a
        second worker after a lost lease) can neither reset its retention nor replace it."""
        try:
            with storage_errors():
                if location == "s3":
                    self._s3.put_object(
                        Bucket=self._bucket,
                        Key=kind.object_key(job_id),
                        Body=body.encode("utf-8"),
                        ContentType="application/json",
                        IfNoneMatch="*",
                    )
                    return
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

    def _get(self, kind: _Kind, job_id: str, location: BlobLocation) -> str | None:
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
