"""What the functions wrote to moto, read back: raw items, counts, objects and item sizes.

Tests read storage directly (not through the code under test) so that an answer and the
state behind it are checked independently. Clients are made once per endpoint: they are
thread-safe, and creating one costs more than most of the calls a test makes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import boto3

from shared import resources as r
from shared.adapters.dynamo_items import job_id_of
from shared.adapters.dynamodb_jobs import DynamoJobRepository
from shared.adapters.payloads import DynamoS3PayloadStore
from shared.job import JobInput
from shared.payload_reads import input_of
from tests.support.aws import REGION, TestResources

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client


@cache
def _dynamodb(endpoint: str) -> DynamoDBClient:
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION)


@cache
def _s3(endpoint: str) -> S3Client:
    return boto3.client("s3", endpoint_url=endpoint, region_name=REGION)


@dataclass(frozen=True)
class Snapshot:
    """Everything in one test's tables and bucket, by key: equal snapshots mean nothing was written."""

    jobs_table: frozenset[tuple[str, str]]
    idempotency_table: frozenset[str]
    objects: frozenset[str]


class Storage:
    """One test's tables and bucket, at the endpoint the `resources` fixture pointed the functions at."""

    def __init__(self, resources: TestResources) -> None:
        self.resources = resources
        endpoint = os.environ["AWS_ENDPOINT_URL"]
        self.dynamodb = _dynamodb(endpoint)
        self.s3 = _s3(endpoint)

    def repository(self) -> DynamoJobRepository:
        """The production repository adapter, wired to this test's tables."""
        return DynamoJobRepository(self.dynamodb, self.resources.jobs_table, self.resources.idempotency_table)

    def payloads(self) -> DynamoS3PayloadStore:
        """The production payload store, wired to this test's table and bucket."""
        return DynamoS3PayloadStore(
            self.dynamodb, lambda: self.s3, self.resources.jobs_table, self.resources.bucket
        )

    def scan(self, table: str) -> list[dict[str, Any]]:
        """Every item of a table, in attribute-value form."""
        items: list[dict[str, Any]] = []
        arguments: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
        while True:
            page = self.dynamodb.scan(**arguments)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def job_items(self) -> list[dict[str, Any]]:
        """The job items (not inputs or results) in the jobs table."""
        return [
            item
            for item in self.scan(self.resources.jobs_table)
            if item[r.TYPE_ATTRIBUTE]["S"] == r.JOB_ITEM_TYPE
        ]

    def job_ids(self) -> list[str]:
        """The ids of the job items in the jobs table."""
        return sorted(job_id_of(item) for item in self.job_items())

    def stored_input(self, job_id: str) -> JobInput | None:
        """A job's input wherever the submit put it: in the job item (small) or beside it."""
        job = self.repository().get_job(job_id)
        return None if job is None else input_of(job, self.payloads())

    def item(self, job_id: str, sort: str) -> dict[str, Any] | None:
        """One raw item of a job's partition (sort: JOB, INPUT or RESULT)."""
        key = {r.PARTITION_KEY: {"S": f"JOB#{job_id}"}, r.SORT_KEY: {"S": sort}}
        found = self.dynamodb.get_item(TableName=self.resources.jobs_table, Key=key, ConsistentRead=True)
        item: dict[str, Any] | None = found.get("Item")
        return item

    def idempotency_items(self) -> list[dict[str, Any]]:
        """The idempotency claims (not the submit-rate counters)."""
        return [
            item
            for item in self.scan(self.resources.idempotency_table)
            if item[r.IDEMPOTENCY_PARTITION_KEY]["S"].startswith("IDEM#")
        ]

    def object_keys(self) -> list[str]:
        """The keys of every object in the payload bucket."""
        page = self.s3.list_objects_v2(Bucket=self.resources.bucket)
        return sorted(entry["Key"] for entry in page.get("Contents", []))

    def snapshot(self) -> Snapshot:
        """The keys of everything stored, to compare before and after a request."""
        return Snapshot(
            jobs_table=frozenset(
                (item[r.PARTITION_KEY]["S"], item[r.SORT_KEY]["S"])
                for item in self.scan(self.resources.jobs_table)
            ),
            idempotency_table=frozenset(
                item[r.IDEMPOTENCY_PARTITION_KEY]["S"] for item in self.scan(self.resources.idempotency_table)
            ),
            objects=frozenset(self.object_keys()),
        )
