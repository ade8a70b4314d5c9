"""AWS resources for integration tests, created in moto from shared.resources (the CDK app's source)."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import boto3

from shared import resources as r

REGION = "us-east-1"


@dataclass(frozen=True)
class TestResources:
    """Names of one test's freshly created resources."""

    jobs_table: str
    idempotency_table: str
    bucket: str
    cursor_secret_arn: str
    budgets_table: str
    output_events_table: str
    documents_table: str = ""
    documents_bucket: str = ""
    slots_table: str = ""

    def environment(self) -> dict[str, str]:
        """The environment the CDK app gives the API functions, for these resources."""
        return {
            r.ENV_DOCUMENTS_TABLE: self.documents_table,
            r.ENV_DOCUMENTS_BUCKET: self.documents_bucket,
            r.ENV_JOBS_TABLE: self.jobs_table,
            r.ENV_IDEMPOTENCY_TABLE: self.idempotency_table,
            r.ENV_PAYLOAD_BUCKET: self.bucket,
            r.ENV_CURSOR_SECRET: self.cursor_secret_arn,
            r.ENV_BUDGETS_TABLE: self.budgets_table,
            r.ENV_OUTPUT_EVENTS_TABLE: self.output_events_table,
            r.ENV_SLOTS_TABLE: self.slots_table,
        }


def jobs_table_definition(name: str) -> dict[str, Any]:
    attributes = [
        r.PARTITION_KEY,
        r.SORT_KEY,
        r.LIST_INDEX_PARTITION,
        r.LIST_INDEX_SORT,
        r.SWEEP_INDEX_PARTITION,
        r.SWEEP_INDEX_SORT,
    ]
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [
            {"AttributeName": r.PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": r.SORT_KEY, "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in attributes],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": r.LIST_INDEX,
                "KeySchema": [
                    {"AttributeName": r.LIST_INDEX_PARTITION, "KeyType": "HASH"},
                    {"AttributeName": r.LIST_INDEX_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {
                    "ProjectionType": "INCLUDE",
                    "NonKeyAttributes": list(r.LIST_INDEX_PROJECTION),
                },
            },
            {
                "IndexName": r.SWEEP_INDEX,
                "KeySchema": [
                    {"AttributeName": r.SWEEP_INDEX_PARTITION, "KeyType": "HASH"},
                    {"AttributeName": r.SWEEP_INDEX_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    }


def budgets_table_definition(name: str) -> dict[str, Any]:
    """The budgets table as the Budgets construct defines it: no stream, one sparse index."""
    attributes = [r.BUDGETS_PARTITION_KEY, r.BUDGETS_SORT_KEY, r.BUDGET_CHECK_PARTITION, r.BUDGET_CHECK_SORT]
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [
            {"AttributeName": r.BUDGETS_PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": r.BUDGETS_SORT_KEY, "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in attributes],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": r.BUDGET_CHECK_INDEX,
                "KeySchema": [
                    {"AttributeName": r.BUDGET_CHECK_PARTITION, "KeyType": "HASH"},
                    {"AttributeName": r.BUDGET_CHECK_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    }


def output_events_table_definition(name: str) -> dict[str, Any]:
    """The output events table as the OutputStreaming construct defines it: its stream feeds the pusher."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [
            {"AttributeName": r.OUTPUT_EVENTS_PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": r.OUTPUT_EVENTS_SORT_KEY, "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": r.OUTPUT_EVENTS_PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": r.OUTPUT_EVENTS_SORT_KEY, "AttributeType": "S"},
        ],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    }


def slots_table_definition(name: str) -> dict[str, Any]:
    """The running slots table as the Fairness construct defines it: one key, no stream."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [{"AttributeName": r.SLOTS_PARTITION_KEY, "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": r.SLOTS_PARTITION_KEY, "AttributeType": "S"}],
    }


def create_resources(endpoint: str) -> TestResources:
    """Fresh tables, bucket and cursor secret with unique names, so tests never share state."""
    suffix = secrets.token_hex(4)
    names = TestResources(
        jobs_table=f"jobs-{suffix}",
        idempotency_table=f"idempotency-{suffix}",
        bucket=f"payloads-{suffix}",
        cursor_secret_arn="",
        budgets_table=f"budgets-{suffix}",
        output_events_table=f"output-events-{suffix}",
        slots_table=f"slots-{suffix}",
    )
    dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION)
    dynamodb.create_table(**jobs_table_definition(names.jobs_table))
    dynamodb.create_table(
        TableName=names.idempotency_table,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": r.IDEMPOTENCY_PARTITION_KEY, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": r.IDEMPOTENCY_PARTITION_KEY, "AttributeType": "S"}],
    )
    dynamodb.create_table(**budgets_table_definition(names.budgets_table))
    dynamodb.create_table(**output_events_table_definition(names.output_events_table))
    dynamodb.create_table(**slots_table_definition(names.slots_table))
    boto3.client("s3", endpoint_url=endpoint, region_name=REGION).create_bucket(Bucket=names.bucket)
    secret = boto3.client("secretsmanager", endpoint_url=endpoint, region_name=REGION).create_secret(
        Name=f"cursor-{suffix}", SecretString=secrets.token_urlsafe(32)
    )
    dynamodb.create_table(**documents_table_definition(f"documents-{suffix}"))
    boto3.client("s3", endpoint_url=endpoint, region_name=REGION).create_bucket(Bucket=f"documents-{suffix}")
    return TestResources(
        documents_table=f"documents-{suffix}",
        documents_bucket=f"documents-{suffix}",
        jobs_table=names.jobs_table,
        idempotency_table=names.idempotency_table,
        bucket=names.bucket,
        cursor_secret_arn=secret["ARN"],
        budgets_table=names.budgets_table,
        output_events_table=names.output_events_table,
        slots_table=names.slots_table,
    )


def connections_table_definition(name: str) -> dict[str, Any]:
    """The connections table (tickets and WebSocket connections) as the Realtime construct defines it."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [
            {"AttributeName": r.CONNECTIONS_PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": r.CONNECTIONS_SORT_KEY, "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": r.CONNECTIONS_PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": r.CONNECTIONS_SORT_KEY, "AttributeType": "S"},
        ],
    }


def create_connections_table(endpoint: str) -> str:
    """A fresh connections table with a unique name."""
    name = f"connections-{secrets.token_hex(4)}"
    boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION).create_table(
        **connections_table_definition(name)
    )
    return name


def webhooks_table_definition(name: str) -> dict[str, Any]:
    """The webhooks table (endpoints, secrets, deliveries) as the Webhooks construct defines it."""
    keys = (r.WEBHOOKS_PARTITION_KEY, r.WEBHOOKS_SORT_KEY, r.WEBHOOKS_TENANT_INDEX_PARTITION)
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [
            {"AttributeName": r.WEBHOOKS_PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": r.WEBHOOKS_SORT_KEY, "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [{"AttributeName": key, "AttributeType": "S"} for key in keys],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": r.WEBHOOKS_TENANT_INDEX,
                "KeySchema": [
                    {"AttributeName": r.WEBHOOKS_TENANT_INDEX_PARTITION, "KeyType": "HASH"},
                    {"AttributeName": r.WEBHOOKS_TENANT_INDEX_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {
                    "ProjectionType": "INCLUDE",
                    "NonKeyAttributes": list(r.WEBHOOKS_TENANT_INDEX_PROJECTION),
                },
            }
        ],
    }


def create_webhooks_table(endpoint: str) -> str:
    """A fresh webhooks table with a unique name."""
    name = f"webhooks-{secrets.token_hex(4)}"
    boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION).create_table(
        **webhooks_table_definition(name)
    )
    return name


def create_batches_table(endpoint: str) -> str:
    """A fresh open batches' table (the batch tier's) with a unique name."""
    name = f"batches-{secrets.token_hex(4)}"
    boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION).create_table(
        TableName=name,
        KeySchema=[{"AttributeName": r.BATCHES_PARTITION_KEY, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": r.BATCHES_PARTITION_KEY, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def create_webhooks_queues(endpoint: str) -> tuple[str, str]:
    """A fresh webhooks queue and its DLQ (URLs); the queue's redrive policy as the construct sets it."""
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION)
    suffix = secrets.token_hex(4)
    dlq = sqs.create_queue(QueueName=f"webhooks-dlq-{suffix}")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(
        QueueName=f"webhooks-{suffix}",
        Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "10"})},
    )["QueueUrl"]
    return queue, dlq


def documents_table_definition(name: str) -> dict[str, Any]:
    """The documents table: the owner's partition, the document id, and the creation-order LSI."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": [
            {"AttributeName": r.DOCUMENTS_PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": r.DOCUMENTS_SORT_KEY, "KeyType": "RANGE"},
        ],
        "AttributeDefinitions": [
            {"AttributeName": key, "AttributeType": "S"}
            for key in (
                r.DOCUMENTS_PARTITION_KEY,
                r.DOCUMENTS_SORT_KEY,
                r.DOCUMENTS_LIST_INDEX_SORT,
                r.DOCUMENTS_PIN_INDEX_PARTITION,
                r.DOCUMENTS_PIN_INDEX_SORT,
            )
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": r.DOCUMENTS_PIN_INDEX,
                "KeySchema": [
                    {"AttributeName": r.DOCUMENTS_PIN_INDEX_PARTITION, "KeyType": "HASH"},
                    {"AttributeName": r.DOCUMENTS_PIN_INDEX_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        "LocalSecondaryIndexes": [
            {
                "IndexName": r.DOCUMENTS_LIST_INDEX,
                "KeySchema": [
                    {"AttributeName": r.DOCUMENTS_PARTITION_KEY, "KeyType": "HASH"},
                    {"AttributeName": r.DOCUMENTS_LIST_INDEX_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    }


@dataclass(frozen=True)
class DocumentResources:
    """One test's documents table, documents bucket and ingest DLQ."""

    table: str
    bucket: str
    dlq_url: str

    def environment(self) -> dict[str, str]:
        """The environment the CDK app gives the ingest function, for these resources."""
        return {
            r.ENV_DOCUMENTS_TABLE: self.table,
            r.ENV_DOCUMENTS_BUCKET: self.bucket,
            r.ENV_INGEST_DLQ_URL: self.dlq_url,
        }


def create_document_resources(endpoint: str) -> DocumentResources:
    """A fresh documents table, bucket and ingest DLQ with unique names."""
    suffix = secrets.token_hex(4)
    names = DocumentResources(table=f"documents-{suffix}", bucket=f"documents-{suffix}", dlq_url="")
    boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION).create_table(
        **documents_table_definition(names.table)
    )
    boto3.client("s3", endpoint_url=endpoint, region_name=REGION).create_bucket(Bucket=names.bucket)
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION)
    dlq_url = sqs.create_queue(QueueName=f"ingest-dlq-{suffix}")["QueueUrl"]
    return DocumentResources(table=names.table, bucket=names.bucket, dlq_url=dlq_url)
