"""Grants narrower than the L2 `grant_*` helpers where those are wider than a function needs.

- DynamoDB: `Table.grant*` add `<table>/index/*` to every statement once a table has an index,
  and `grant_read_write_data` brings BatchWriteItem, DeleteItem and Scan with it. Here a role gets
  exactly the actions it calls, on the table and on the indexes it queries by name.
- S3: `Bucket.grant_read`/`grant_put` bring `s3:GetObject*`, `s3:List*`, `s3:Abort*` and friends.
  Here a role gets exactly GetObject or PutObject, on the key prefixes it uses (plus ListBucket
  for readers, so that a missing object reads as 404, not 403).
- SQS: `Queue.grant_send_messages` adds GetQueueAttributes and GetQueueUrl; the functions only
  send (SendMessage also authorizes SendMessageBatch) to a queue URL they are given.
- Secrets Manager: `Secret.grant_read` adds DescribeSecret; Powertools' reader only calls
  GetSecretValue.
All go through `iam.Grant`, like the L2 helpers, so the statements land in the role's policy.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import IConstruct

from infra import nag


def grant_table(
    table: dynamodb.ITable, grantee: iam.IGrantable, actions: Sequence[str], *, indexes: Sequence[str] = ()
) -> iam.Grant:
    """`dynamodb:<action>` for each action, on the table and the named indexes only."""
    resources = [table.table_arn, *(f"{table.table_arn}/index/{name}" for name in indexes)]
    return iam.Grant.add_to_principal(
        grantee=grantee, actions=[f"dynamodb:{action}" for action in actions], resource_arns=resources
    )


def grant_send(queue: sqs.IQueue, grantee: iam.IGrantable) -> iam.Grant:
    """`sqs:SendMessage` (which covers SendMessageBatch) on one queue, nothing else."""
    return queue.grant(grantee, "sqs:SendMessage")


def grant_secret_value(secret: secretsmanager.ISecret, grantee: iam.IGrantable) -> iam.Grant:
    """`secretsmanager:GetSecretValue` on one secret, nothing else (its key is AWS-managed)."""
    return iam.Grant.add_to_principal(
        grantee=grantee, actions=["secretsmanager:GetSecretValue"], resource_arns=[secret.secret_arn]
    )


def grant_objects(
    bucket: s3.IBucket, grantee: iam.IGrantable, actions: Sequence[str], prefixes: Sequence[str]
) -> iam.Grant:
    """`s3:<action>` for each action, on the objects under the given key prefixes only.

    Acknowledges the cdk-nag wildcard finding on each prefix: object keys are per-job ids, so a
    prefix is the narrowest resource there is.
    """
    grant = iam.Grant.add_to_principal(
        grantee=grantee,
        actions=[f"s3:{action}" for action in actions],
        resource_arns=[bucket.arn_for_objects(f"{prefix}*") for prefix in prefixes],
    )
    for prefix in prefixes:
        nag.acknowledge(
            _policy_scope(grantee),
            nag.wildcard_resource(f"<{_logical_id(bucket)}.Arn>/{prefix}*"),
            f"Objects under {prefix} are named by job id, unknown until a job exists: the key prefix is "
            f"the narrowest resource, and only {', '.join(actions)} is allowed on it.",
        )
    return grant


def grant_missing_objects_as_404(bucket: s3.IBucket, grantee: iam.IGrantable) -> iam.Grant:
    """`s3:ListBucket` on the bucket, for roles that read objects which may have expired.

    Without it S3 answers GetObject on a missing key with 403 AccessDenied instead of 404
    NoSuchKey, and an expired input or result would look like a permission error.
    """
    return iam.Grant.add_to_principal(
        grantee=grantee, actions=["s3:ListBucket"], resource_arns=[bucket.bucket_arn]
    )


def _policy_scope(grantee: iam.IGrantable) -> IConstruct:
    """Where the grantee's policy lives: its role when it has one (a function), else itself."""
    role = getattr(grantee, "role", None)
    if isinstance(role, iam.Role):
        return role
    if isinstance(grantee, iam.Role):
        return grantee
    raise TypeError("grant_objects needs a function or a role")


def _logical_id(bucket: s3.IBucket) -> str:
    stack = Stack.of(bucket)
    child = bucket.node.default_child
    if not isinstance(child, s3.CfnBucket):
        raise TypeError("grant_objects needs a bucket defined in this app")
    return str(stack.resolve(child.logical_id))


def grant_manage_connections(
    api: apigwv2.IWebSocketApi, stage_name: str, grantee: iam.IGrantable, method: str
) -> iam.Grant:
    """`execute-api:ManageConnections` for one HTTP method on one stage's `@connections`, nothing wider.

    POST sends a message, DELETE closes a connection, GET reads its details. The L2 helper
    (`grant_manage_connections`) allows every method on every stage of the API.
    """
    arn = Stack.of(api).format_arn(
        service="execute-api", resource=api.api_id, resource_name=f"{stage_name}/{method}/@connections/*"
    )
    grant = iam.Grant.add_to_principal(
        grantee=grantee, actions=["execute-api:ManageConnections"], resource_arns=[arn]
    )
    nag.acknowledge(
        _policy_scope(grantee),
        nag.wildcard_resource(
            f"arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<{_api_logical_id(api)}>"
            f"/{stage_name}/{method}/@connections/*"
        ),
        f"Connection ids are made by API Gateway when a client connects: `@connections/*` on this API's "
        f"{stage_name} stage, for {method} only, is the narrowest resource there is.",
    )
    return grant


def _api_logical_id(api: apigwv2.IWebSocketApi) -> str:
    child = api.node.default_child
    if not isinstance(child, apigwv2.CfnApi):
        raise TypeError("grant_manage_connections needs a WebSocket API defined in this app")
    return str(Stack.of(api).resolve(child.logical_id))
