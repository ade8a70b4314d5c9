"""required(): what IAM authorizes for each boto3 call the functions make (outlast.local.iam.requests).

The expected pairs are the Service Authorization Reference's: the action each operation needs
and the resource type it is checked against.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore import xform_name

from outlast.local.iam.requests import Authorization, UnmappedOperation, Where, required

PROJECT = Path(__file__).resolve().parents[2]
WHERE = Where(
    region="us-east-1",
    account="123456789012",
    stages={"http://127.0.0.1:4000/ws": ("wsapi", "live")},
    secrets={"openai": "arn:aws:secretsmanager:us-east-1:123456789012:secret:openai-AbCdEf"},
)
TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"
OTHER = "arn:aws:dynamodb:us-east-1:123456789012:table/budgets"
STREAM = TABLE + "/stream/2026-01-01T00:00:00.000"
QUEUE_URL = "http://127.0.0.1:5000/123456789012/jobs-queue"
QUEUE = "arn:aws:sqs:us-east-1:123456789012:jobs-queue"
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:openai-AbCdEf"


def pairs(*items: tuple[str, str]) -> list[Authorization]:
    return [Authorization(action, resource) for action, resource in items]


CASES = [
    # DynamoDB: the table, or the index a Query/Scan names.
    ("dynamodb", "GetItem", {"TableName": "jobs", "Key": {}}, pairs(("dynamodb:GetItem", TABLE))),
    ("dynamodb", "PutItem", {"TableName": "jobs", "Item": {}}, pairs(("dynamodb:PutItem", TABLE))),
    ("dynamodb", "UpdateItem", {"TableName": "jobs", "Key": {}}, pairs(("dynamodb:UpdateItem", TABLE))),
    ("dynamodb", "DeleteItem", {"TableName": "jobs", "Key": {}}, pairs(("dynamodb:DeleteItem", TABLE))),
    ("dynamodb", "GetItem", {"TableName": TABLE, "Key": {}}, pairs(("dynamodb:GetItem", TABLE))),
    ("dynamodb", "Query", {"TableName": "jobs"}, pairs(("dynamodb:Query", TABLE))),
    (
        "dynamodb",
        "Query",
        {"TableName": "jobs", "IndexName": "byOwner"},
        pairs(("dynamodb:Query", TABLE + "/index/byOwner")),
    ),
    (
        "dynamodb",
        "Scan",
        {"TableName": "jobs", "IndexName": "x"},
        pairs(("dynamodb:Scan", TABLE + "/index/x")),
    ),
    (
        "dynamodb",
        "BatchGetItem",
        {"RequestItems": {"jobs": {"Keys": []}, "budgets": {"Keys": []}}},
        pairs(("dynamodb:BatchGetItem", TABLE), ("dynamodb:BatchGetItem", OTHER)),
    ),
    (
        "dynamodb",
        "BatchWriteItem",
        {"RequestItems": {"budgets": []}},
        pairs(("dynamodb:BatchWriteItem", OTHER)),
    ),
    (
        "dynamodb",
        "TransactWriteItems",
        {
            "TransactItems": [
                {"Put": {"TableName": "budgets", "Item": {}}},
                {"Update": {"TableName": "budgets", "Key": {}}},
                {"Delete": {"TableName": "jobs", "Key": {}}},
                {"ConditionCheck": {"TableName": "jobs", "Key": {}}},
            ]
        },
        pairs(
            ("dynamodb:PutItem", OTHER),
            ("dynamodb:UpdateItem", OTHER),
            ("dynamodb:DeleteItem", TABLE),
            ("dynamodb:ConditionCheckItem", TABLE),
        ),
    ),
    (
        "dynamodb",
        "TransactGetItems",
        {
            "TransactItems": [
                {"Get": {"TableName": "jobs", "Key": {}}},
                {"Get": {"TableName": "budgets", "Key": {}}},
            ]
        },
        pairs(("dynamodb:GetItem", TABLE), ("dynamodb:GetItem", OTHER)),
    ),
    # DynamoDB Streams: the stream (an iterator names its stream).
    ("dynamodbstreams", "DescribeStream", {"StreamArn": STREAM}, pairs(("dynamodb:DescribeStream", STREAM))),
    (
        "dynamodbstreams",
        "GetShardIterator",
        {"StreamArn": STREAM, "ShardId": "s"},
        pairs(("dynamodb:GetShardIterator", STREAM)),
    ),
    (
        "dynamodbstreams",
        "GetRecords",
        {"ShardIterator": STREAM + "|1|AAAAopaque"},
        pairs(("dynamodb:GetRecords", STREAM)),
    ),
    ("dynamodbstreams", "ListStreams", {}, pairs(("dynamodb:ListStreams", "*"))),
    # S3: objects by key; listings against the bucket.
    (
        "s3",
        "GetObject",
        {"Bucket": "payloads", "Key": "results/j.json"},
        pairs(("s3:GetObject", "arn:aws:s3:::payloads/results/j.json")),
    ),
    (
        "s3",
        "GetObject",
        {"Bucket": "payloads", "Key": "k", "VersionId": "v1"},
        pairs(("s3:GetObjectVersion", "arn:aws:s3:::payloads/k")),
    ),
    (
        "s3",
        "HeadObject",
        {"Bucket": "payloads", "Key": "k"},
        pairs(("s3:GetObject", "arn:aws:s3:::payloads/k")),
    ),
    (
        "s3",
        "PutObject",
        {"Bucket": "payloads", "Key": "inputs/j.json", "Body": b"", "IfNoneMatch": "*"},
        pairs(("s3:PutObject", "arn:aws:s3:::payloads/inputs/j.json")),
    ),
    (
        "s3",
        "PutObject",
        {"Bucket": "payloads", "Key": "k", "Tagging": "a=b"},
        pairs(
            ("s3:PutObject", "arn:aws:s3:::payloads/k"), ("s3:PutObjectTagging", "arn:aws:s3:::payloads/k")
        ),
    ),
    (
        "s3",
        "DeleteObject",
        {"Bucket": "payloads", "Key": "k"},
        pairs(("s3:DeleteObject", "arn:aws:s3:::payloads/k")),
    ),
    (
        "s3",
        "ListObjectsV2",
        {"Bucket": "payloads", "Prefix": "inputs/"},
        pairs(("s3:ListBucket", "arn:aws:s3:::payloads")),
    ),
    (
        "s3",
        "CopyObject",
        {"Bucket": "dst", "Key": "b", "CopySource": "payloads/a%20b"},
        pairs(("s3:GetObject", "arn:aws:s3:::payloads/a b"), ("s3:PutObject", "arn:aws:s3:::dst/b")),
    ),
    (
        "s3",
        "DeleteObjects",
        {"Bucket": "payloads", "Delete": {"Objects": [{"Key": "a"}, {"Key": "b"}]}},
        pairs(("s3:DeleteObject", "arn:aws:s3:::payloads/a"), ("s3:DeleteObject", "arn:aws:s3:::payloads/b")),
    ),
    # SQS: the queue its URL names; batch calls are their single action.
    ("sqs", "SendMessage", {"QueueUrl": QUEUE_URL, "MessageBody": "{}"}, pairs(("sqs:SendMessage", QUEUE))),
    ("sqs", "SendMessageBatch", {"QueueUrl": QUEUE_URL, "Entries": []}, pairs(("sqs:SendMessage", QUEUE))),
    ("sqs", "ReceiveMessage", {"QueueUrl": QUEUE_URL}, pairs(("sqs:ReceiveMessage", QUEUE))),
    (
        "sqs",
        "DeleteMessageBatch",
        {"QueueUrl": QUEUE_URL, "Entries": []},
        pairs(("sqs:DeleteMessage", QUEUE)),
    ),
    (
        "sqs",
        "ChangeMessageVisibility",
        {"QueueUrl": QUEUE_URL, "ReceiptHandle": "r", "VisibilityTimeout": 3},
        pairs(("sqs:ChangeMessageVisibility", QUEUE)),
    ),
    (
        "sqs",
        "SendMessage",
        {"QueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs-queue"},
        pairs(("sqs:SendMessage", QUEUE)),
    ),
    ("sqs", "GetQueueUrl", {"QueueName": "jobs-queue"}, pairs(("sqs:GetQueueUrl", QUEUE))),
    # Secrets Manager: the secret, by ARN or by name.
    (
        "secretsmanager",
        "GetSecretValue",
        {"SecretId": SECRET},
        pairs(("secretsmanager:GetSecretValue", SECRET)),
    ),
    (
        "secretsmanager",
        "GetSecretValue",
        {"SecretId": "openai"},
        pairs(("secretsmanager:GetSecretValue", SECRET)),
    ),
]


@pytest.mark.parametrize(("service", "operation", "params", "expected"), CASES)
def test_required(
    service: str, operation: str, params: dict[str, Any], expected: list[Authorization]
) -> None:
    assert required(service, operation, params, WHERE) == expected


class TestConnections:
    """`@connections` calls: execute-api:ManageConnections on API/STAGE/METHOD/@connections/ID."""

    PREFIX = "arn:aws:execute-api:us-east-1:123456789012"

    @pytest.mark.parametrize(
        ("operation", "method"),
        [("PostToConnection", "POST"), ("GetConnection", "GET"), ("DeleteConnection", "DELETE")],
    )
    def test_the_local_stage(self, operation: str, method: str) -> None:
        url = "http://127.0.0.1:4000/ws/@connections/Ab%3D"

        found = required("apigatewaymanagementapi", operation, {"ConnectionId": "Ab="}, WHERE, url)

        assert found == pairs(
            ("execute-api:ManageConnections", f"{self.PREFIX}:wsapi/live/{method}/@connections/Ab=")
        )

    def test_an_aws_stage_url(self) -> None:
        url = "https://abc123.execute-api.us-east-1.amazonaws.com/prod/@connections/c1"

        found = required("apigatewaymanagementapi", "PostToConnection", {"ConnectionId": "c1"}, WHERE, url)

        assert found == pairs(
            ("execute-api:ManageConnections", f"{self.PREFIX}:abc123/prod/POST/@connections/c1")
        )

    def test_an_endpoint_that_is_no_stage_is_not_guessed(self) -> None:
        with pytest.raises(UnmappedOperation):
            required(
                "apigatewaymanagementapi",
                "PostToConnection",
                {"ConnectionId": "c"},
                WHERE,
                "http://x/@connections/c",
            )


class TestUnknownCalls:
    @pytest.mark.parametrize(
        ("service", "operation", "params"),
        [
            pytest.param("dynamodb", "ExecuteStatement", {"Statement": "SELECT * FROM jobs"}, id="partiql"),
            pytest.param("s3", "PutBucketPolicy", {"Bucket": "b"}, id="bucket-policy"),
            pytest.param("kms", "Decrypt", {}, id="unknown-service"),
            pytest.param("dynamodb", "GetItem", {"Key": {}}, id="missing-parameter"),
            pytest.param(
                "dynamodbstreams", "GetRecords", {"ShardIterator": "opaque"}, id="iterator-naming-no-stream"
            ),
            pytest.param("sqs", "SendMessage", {"QueueUrl": "http://host/not-a-queue"}, id="not-a-queue-url"),
        ],
    )
    def test_are_refused_loudly(self, service: str, operation: str, params: dict[str, Any]) -> None:
        with pytest.raises(UnmappedOperation, match=r"outlast/local/iam/requests\.py"):
            required(service, operation, params, WHERE)


# The AWS services the functions use, and where their calls are made.
SERVICES = ("dynamodb", "dynamodbstreams", "s3", "sqs", "secretsmanager", "apigatewaymanagementapi")
CALLERS = ("functions", "shared", "outlast/local/event_sources.py")


def _operations() -> dict[str, list[tuple[str, str]]]:
    """boto3 method name -> the (service, operation) pairs it may be."""
    session = botocore.session.get_session()
    found: dict[str, list[tuple[str, str]]] = {}
    for service in SERVICES:
        for operation in session.get_service_model(service).operation_names:
            found.setdefault(xform_name(operation), []).append((service, operation))
    return found


def _called_methods() -> set[str]:
    names = set()
    for root in CALLERS:
        path = PROJECT / root
        for file in [path] if path.is_file() else path.rglob("*.py"):
            for node in ast.walk(ast.parse(file.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    names.add(node.func.attr)
    return names


def test_every_aws_call_the_code_makes_is_mapped() -> None:
    # Given every method call in the functions, shared/ and the event source pollers that is the
    # name of an operation of a service the project uses
    operations = _operations()
    called = _called_methods() & set(operations)
    assert {"put_item", "get_object", "send_message_batch", "post_to_connection", "get_records"} <= called

    # Then local mode knows what each needs (for at least one service that has it)
    unmapped = []
    for method in sorted(called):
        mapped = False
        for service, operation in operations[method]:
            try:
                required(service, operation, {}, WHERE)
            except UnmappedOperation as error:
                mapped = mapped or "unexpected parameters" in str(error)
            else:
                mapped = True
        if not mapped:
            unmapped.append(method)
    assert not unmapped, f"add these to outlast/local/iam/requests.py: {unmapped}"
