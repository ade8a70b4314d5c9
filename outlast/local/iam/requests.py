"""What AWS authorizes for one boto3 call, pure: (service, operation, parameters) -> [(action, ARN)].

Each entry is what IAM checks for that call (the Service Authorization Reference's "actions,
resources and condition keys" tables): DynamoDB against the table or `table/T/index/I`, batch
calls per table and transactions item by item (each item with its own action), S3 against the
object `bucket/key` (or the bucket for listings), SQS against the queue ARN (a batch call is its
single action), Secrets Manager against the secret ARN, the `@connections` API as
`execute-api:ManageConnections` on `API_ID/STAGE/METHOD/@connections/ID`.

An operation missing here raises UnmappedOperation: the guard denies it and says so, so a call
added to the code cannot go unchecked; add its entry here (with a test) when that happens.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Params = Mapping[str, Any]


@dataclass(frozen=True)
class Authorization:
    """One thing IAM checks: an action on a resource."""

    action: str
    resource: str


@dataclass(frozen=True)
class Where:
    """The local facts a call's ARNs are built from.

    `stages` maps a WebSocket stage's management endpoint (the callback URL functions are given)
    to its (API id, stage name); `secrets` maps a secret's name to its ARN (a secret may be named
    either way).
    """

    region: str
    account: str
    stages: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict)


class UnmappedOperation(Exception):  # noqa: N818 - it is a finding, not a failure of the mapper
    """Local mode does not know what this operation needs: it is denied, never waved through."""

    def __init__(self, service: str, operation: str, detail: str = "") -> None:
        reason = f": {detail}" if detail else ""
        super().__init__(
            f"local mode does not know which permissions {service}.{operation} needs{reason} "
            "(add it to outlast/local/iam/requests.py)"
        )
        self.service = service
        self.operation = operation


Mapper = Callable[[Params, Where, str], list[Authorization]]


def required(
    service: str, operation: str, params: Params, where: Where, url: str = ""
) -> list[Authorization]:
    """Every (action, resource) AWS authorizes for this call; raises UnmappedOperation."""
    mapper = _MAPPERS.get(service, {}).get(operation)
    if mapper is None:
        raise UnmappedOperation(service, operation)
    try:
        return mapper(params, where, url)
    except (KeyError, TypeError, ValueError) as error:
        raise UnmappedOperation(service, operation, f"unexpected parameters ({error!r})") from error


# --- DynamoDB ---------------------------------------------------------------------------------


def table_arn(name_or_arn: str, where: Where) -> str:
    """A table's ARN from its name (or the ARN itself: DynamoDB accepts either)."""
    if name_or_arn.startswith("arn:"):
        return name_or_arn
    return f"arn:aws:dynamodb:{where.region}:{where.account}:table/{name_or_arn}"


def _on_table(action: str) -> Mapper:
    def mapper(params: Params, where: Where, _url: str) -> list[Authorization]:
        arn = table_arn(str(params["TableName"]), where)
        if params.get("IndexName"):
            arn = f"{arn}/index/{params['IndexName']}"
        return [Authorization(f"dynamodb:{action}", arn)]

    return mapper


def _per_table(action: str) -> Mapper:
    def mapper(params: Params, where: Where, _url: str) -> list[Authorization]:
        return [Authorization(f"dynamodb:{action}", table_arn(str(t), where)) for t in params["RequestItems"]]

    return mapper


_TRANSACT_WRITE = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def _transact_write(params: Params, where: Where, _url: str) -> list[Authorization]:
    found = []
    for item in params["TransactItems"]:
        ((kind, request),) = item.items()
        found.append(
            Authorization(f"dynamodb:{_TRANSACT_WRITE[kind]}", table_arn(str(request["TableName"]), where))
        )
    return found


def _transact_get(params: Params, where: Where, _url: str) -> list[Authorization]:
    return [
        Authorization("dynamodb:GetItem", table_arn(str(item["Get"]["TableName"]), where))
        for item in params["TransactItems"]
    ]


def _stream(action: str) -> Mapper:
    def mapper(params: Params, _where: Where, _url: str) -> list[Authorization]:
        return [Authorization(f"dynamodb:{action}", str(params["StreamArn"]))]

    return mapper


def _get_records(params: Params, _where: Where, _url: str) -> list[Authorization]:
    # A shard iterator begins with its stream's ARN (`arn:...:table/T/stream/LABEL|1|...`), in AWS
    # and in moto alike; anything else is not something local mode can place.
    arn = str(params["ShardIterator"]).split("|", 1)[0]
    if not arn.startswith("arn:aws:dynamodb:"):
        raise ValueError("a shard iterator that names no stream")
    return [Authorization("dynamodb:GetRecords", arn)]


# --- S3 -----------------------------------------------------------------------------------------


def _object(action: str, *, version_action: str | None = None) -> Mapper:
    def mapper(params: Params, _where: Where, _url: str) -> list[Authorization]:
        name = version_action if version_action and params.get("VersionId") else action
        arn = f"arn:aws:s3:::{params['Bucket']}/{params['Key']}"
        found = [Authorization(f"s3:{name}", arn)]
        # A PUT that sets tags or an ACL needs those permissions as well.
        if action == "PutObject" and params.get("Tagging"):
            found.append(Authorization("s3:PutObjectTagging", arn))
        if action == "PutObject" and params.get("ACL"):
            found.append(Authorization("s3:PutObjectAcl", arn))
        return found

    return mapper


def _bucket(action: str) -> Mapper:
    def mapper(params: Params, _where: Where, _url: str) -> list[Authorization]:
        return [Authorization(f"s3:{action}", f"arn:aws:s3:::{params['Bucket']}")]

    return mapper


def _copy_object(params: Params, _where: Where, _url: str) -> list[Authorization]:
    source = params["CopySource"]
    if isinstance(source, str):
        source_arn = f"arn:aws:s3:::{urllib.parse.unquote(source.lstrip('/').split('?', 1)[0])}"
    else:
        source_arn = f"arn:aws:s3:::{source['Bucket']}/{source['Key']}"
    return [
        Authorization("s3:GetObject", source_arn),
        Authorization("s3:PutObject", f"arn:aws:s3:::{params['Bucket']}/{params['Key']}"),
    ]


def _delete_objects(params: Params, _where: Where, _url: str) -> list[Authorization]:
    return [
        Authorization("s3:DeleteObject", f"arn:aws:s3:::{params['Bucket']}/{item['Key']}")
        for item in params["Delete"]["Objects"]
    ]


# --- SQS, Secrets Manager, the @connections API -------------------------------------------------


def queue_arn(url: str, where: Where) -> str:
    """A queue's ARN from its URL (`.../ACCOUNT/NAME`, in AWS and in moto alike)."""
    path = urllib.parse.urlsplit(url).path.strip("/").split("/")
    if len(path) != 2:
        raise ValueError(f"not a queue URL: {url}")
    account, name = path
    return f"arn:aws:sqs:{where.region}:{account}:{name}"


def _queue(action: str) -> Mapper:
    def mapper(params: Params, where: Where, _url: str) -> list[Authorization]:
        return [Authorization(f"sqs:{action}", queue_arn(str(params["QueueUrl"]), where))]

    return mapper


def _queue_by_name(params: Params, where: Where, _url: str) -> list[Authorization]:
    account = params.get("QueueOwnerAWSAccountId") or where.account
    return [Authorization("sqs:GetQueueUrl", f"arn:aws:sqs:{where.region}:{account}:{params['QueueName']}")]


def secret_arn(secret_id: str, where: Where) -> str:
    """A secret's ARN from its ARN or name (an unknown name: the ARN it would have, sans suffix)."""
    if secret_id.startswith("arn:"):
        return secret_id
    return (
        where.secrets.get(secret_id)
        or f"arn:aws:secretsmanager:{where.region}:{where.account}:secret:{secret_id}"
    )


def _secret(action: str) -> Mapper:
    def mapper(params: Params, where: Where, _url: str) -> list[Authorization]:
        return [Authorization(f"secretsmanager:{action}", secret_arn(str(params["SecretId"]), where))]

    return mapper


def connection_arn(url: str, method: str, connection_id: str, where: Where) -> str:
    """`execute-api:ManageConnections`' resource for a call to a stage's `@connections` endpoint."""
    endpoint = url.split("/@connections", 1)[0].rstrip("/")
    if endpoint in where.stages:
        api_id, stage = where.stages[endpoint]
    else:
        # The AWS form: https://API_ID.execute-api.REGION.amazonaws.com/STAGE
        parts = urllib.parse.urlsplit(endpoint)
        host, stage = parts.hostname or "", parts.path.strip("/")
        if ".execute-api." not in host or not stage or "/" in stage:
            raise ValueError(f"not a WebSocket stage's endpoint: {endpoint}")
        api_id = host.split(".", 1)[0]
    prefix = f"arn:aws:execute-api:{where.region}:{where.account}"
    return f"{prefix}:{api_id}/{stage}/{method}/@connections/{connection_id}"


def _connections(method: str) -> Mapper:
    def mapper(params: Params, where: Where, url: str) -> list[Authorization]:
        arn = connection_arn(url, method, str(params["ConnectionId"]), where)
        return [Authorization("execute-api:ManageConnections", arn)]

    return mapper


_MAPPERS: dict[str, dict[str, Mapper]] = {
    "dynamodb": {
        **{op: _on_table(op) for op in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "DescribeTable")},
        "Query": _on_table("Query"),
        "Scan": _on_table("Scan"),
        "BatchGetItem": _per_table("BatchGetItem"),
        "BatchWriteItem": _per_table("BatchWriteItem"),
        "TransactWriteItems": _transact_write,
        "TransactGetItems": _transact_get,
    },
    "dynamodbstreams": {
        "DescribeStream": _stream("DescribeStream"),
        "GetShardIterator": _stream("GetShardIterator"),
        "GetRecords": _get_records,
        "ListStreams": lambda _params, _where, _url: [Authorization("dynamodb:ListStreams", "*")],
    },
    "s3": {
        "GetObject": _object("GetObject", version_action="GetObjectVersion"),
        "HeadObject": _object("GetObject", version_action="GetObjectVersion"),
        "PutObject": _object("PutObject"),
        "DeleteObject": _object("DeleteObject", version_action="DeleteObjectVersion"),
        "CreateMultipartUpload": _object("PutObject"),
        "UploadPart": _object("PutObject"),
        "CompleteMultipartUpload": _object("PutObject"),
        "AbortMultipartUpload": _object("AbortMultipartUpload"),
        "CopyObject": _copy_object,
        "DeleteObjects": _delete_objects,
        "ListObjectsV2": _bucket("ListBucket"),
        "ListObjects": _bucket("ListBucket"),
        "HeadBucket": _bucket("ListBucket"),
    },
    "sqs": {
        "SendMessage": _queue("SendMessage"),
        "SendMessageBatch": _queue("SendMessage"),
        "ReceiveMessage": _queue("ReceiveMessage"),
        "DeleteMessage": _queue("DeleteMessage"),
        "DeleteMessageBatch": _queue("DeleteMessage"),
        "ChangeMessageVisibility": _queue("ChangeMessageVisibility"),
        "ChangeMessageVisibilityBatch": _queue("ChangeMessageVisibility"),
        "GetQueueAttributes": _queue("GetQueueAttributes"),
        "PurgeQueue": _queue("PurgeQueue"),
        "GetQueueUrl": _queue_by_name,
    },
    "secretsmanager": {
        "GetSecretValue": _secret("GetSecretValue"),
        "DescribeSecret": _secret("DescribeSecret"),
        "PutSecretValue": _secret("PutSecretValue"),
    },
    "apigatewaymanagementapi": {
        "PostToConnection": _connections("POST"),
        "GetConnection": _connections("GET"),
        "DeleteConnection": _connections("DELETE"),
    },
}
