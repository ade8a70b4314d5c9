"""Create the template's resources in moto, from the template's own properties.

Tables (keys, indexes, stream, TTL), queues (visibility, redrive to the DLQ), buckets, secrets,
the Cognito user pool and its client: each is created the way CloudFormation would create it,
and what `Ref` and `Fn::GetAtt` return for it is recorded in the resolver, so functions'
environments and event source mappings resolve to the local resources.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3

from outlast.local.template import ACCOUNT_ID, REGION, Resolver, Resource, Template

# Only what CreateTable takes; SSE, PITR, tags and contributor insights do not matter to moto.
_TABLE_KEYS = ("AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "LocalSecondaryIndexes")


@dataclass
class LocalResources:
    """Physical names of what was created, by logical id."""

    tables: dict[str, str] = field(default_factory=dict)
    table_ttl: dict[str, str] = field(default_factory=dict)
    streams: dict[str, str] = field(default_factory=dict)
    queues: dict[str, str] = field(default_factory=dict)
    buckets: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    user_pools: dict[str, str] = field(default_factory=dict)
    user_pool_clients: dict[str, str] = field(default_factory=dict)


def _name(resolver: Resolver, resource: Resource, given: str | None, *, lower: bool = False) -> str:
    if given:
        return str(resolver.resolve(given))
    name = f"{resolver.stack_name}-{resource.logical_id}"[:200]
    return name.lower() if lower else name


class Provisioner:
    """Creates resources in moto and teaches the resolver their Refs and attributes."""

    def __init__(self, template: Template, resolver: Resolver, endpoint: str) -> None:
        self.template = template
        self.resolver = resolver
        self.endpoint = endpoint
        self.created = LocalResources()

    def client(self, service: str) -> Any:
        """A boto3 client for moto."""
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION)  # type: ignore[call-overload]

    def provision(self) -> LocalResources:
        """Everything local mode runs on, in dependency order."""
        self._placeholders()
        steps: list[tuple[str, Callable[[Resource], None]]] = [
            ("AWS::DynamoDB::Table", self._table),
            ("AWS::S3::Bucket", self._bucket),
            ("AWS::SecretsManager::Secret", self._secret),
            ("AWS::Cognito::UserPool", self._user_pool),
            ("AWS::Cognito::UserPoolClient", self._user_pool_client),
            ("AWS::SQS::Queue", self._queue),
        ]
        for resource_type, create in steps:
            for resource in self.template.resources(resource_type):
                create(resource)
        for resource in self.template.resources("AWS::SQS::Queue"):
            self._redrive(resource)
        return self.created

    def _placeholders(self) -> None:
        """Refs and ARNs for everything local mode does not create (roles, alarms, log groups...)."""
        for resource in self.template.resources():
            self.resolver.refs.setdefault(resource.logical_id, resource.logical_id)
            service = resource.type.split("::")[1].lower()
            arn = f"arn:aws:{service}:{REGION}:{ACCOUNT_ID}:{resource.logical_id}"
            self.resolver.attributes.setdefault((resource.logical_id, "Arn"), arn)
        for resource in self.template.resources("AWS::Lambda::Function"):
            name = _name(self.resolver, resource, resource.properties.get("FunctionName"))
            self.resolver.refs[resource.logical_id] = name
            self.resolver.attributes[(resource.logical_id, "Arn")] = (
                f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{name}"
            )

    def _table(self, resource: Resource) -> None:
        properties = self.resolver.resolve(resource.properties)
        name = _name(self.resolver, resource, properties.get("TableName"))
        arguments: dict[str, Any] = {"TableName": name, "BillingMode": "PAY_PER_REQUEST"}
        arguments.update({key: properties[key] for key in _TABLE_KEYS if key in properties})
        for index in arguments.get("GlobalSecondaryIndexes", []):
            index.pop("ContributorInsightsSpecification", None)
            # Local tables are always on demand, whatever the stage's billingMode says.
            index.pop("ProvisionedThroughput", None)
        stream = properties.get("StreamSpecification")
        if stream:
            arguments["StreamSpecification"] = {
                "StreamEnabled": True,
                "StreamViewType": stream["StreamViewType"],
            }
        dynamodb = self.client("dynamodb")
        table = dynamodb.create_table(**arguments)["TableDescription"]
        ttl = properties.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
            )
            self.created.table_ttl[resource.logical_id] = ttl["AttributeName"]
        self.created.tables[resource.logical_id] = name
        self.resolver.refs[resource.logical_id] = name
        self.resolver.attributes[(resource.logical_id, "Arn")] = table["TableArn"]
        if "LatestStreamArn" in table:
            self.created.streams[resource.logical_id] = table["LatestStreamArn"]
            self.resolver.attributes[(resource.logical_id, "StreamArn")] = table["LatestStreamArn"]

    def _bucket(self, resource: Resource) -> None:
        properties = self.resolver.resolve(resource.properties)
        name = _name(self.resolver, resource, properties.get("BucketName"), lower=True)[:63]
        self.client("s3").create_bucket(Bucket=name)
        self.created.buckets[resource.logical_id] = name
        self.resolver.refs[resource.logical_id] = name
        self.resolver.attributes[(resource.logical_id, "Arn")] = f"arn:aws:s3:::{name}"
        self.resolver.attributes[(resource.logical_id, "DomainName")] = f"{name}.s3.amazonaws.com"

    def _secret(self, resource: Resource) -> None:
        properties = self.resolver.resolve(resource.properties)
        name = _name(self.resolver, resource, properties.get("Name"))
        value = properties.get("SecretString") or _generate(properties.get("GenerateSecretString", {}))
        arn = self.client("secretsmanager").create_secret(Name=name, SecretString=value)["ARN"]
        self.created.secrets[resource.logical_id] = arn
        self.resolver.refs[resource.logical_id] = arn

    def _user_pool(self, resource: Resource) -> None:
        properties = self.resolver.resolve(resource.properties)
        arguments: dict[str, Any] = {"PoolName": properties.get("UserPoolName") or resource.logical_id}
        for key in (
            "Policies",
            "Schema",
            "AutoVerifiedAttributes",
            "UsernameAttributes",
            "AdminCreateUserConfig",
        ):
            if key in properties:
                arguments[key] = properties[key]
        pool = self.client("cognito-idp").create_user_pool(**arguments)["UserPool"]
        self.created.user_pools[resource.logical_id] = pool["Id"]
        self.resolver.refs[resource.logical_id] = pool["Id"]
        self.resolver.attributes[(resource.logical_id, "Arn")] = pool["Arn"]
        self.resolver.attributes[(resource.logical_id, "ProviderName")] = (
            f"cognito-idp.{REGION}.amazonaws.com/{pool['Id']}"
        )
        self.resolver.attributes[(resource.logical_id, "ProviderURL")] = (
            f"https://cognito-idp.{REGION}.amazonaws.com/{pool['Id']}"
        )

    def _user_pool_client(self, resource: Resource) -> None:
        # Not the callback and sign-out URLs: the console's name its CloudFront distribution, which
        # local mode does not create (its console front has its own origin and checks redirects).
        wanted = ("UserPoolId", "ClientName", "GenerateSecret", "ExplicitAuthFlows", "ReadAttributes",
                  "WriteAttributes", "PreventUserExistenceErrors")  # fmt: skip
        properties = self.resolver.resolve({k: v for k, v in resource.properties.items() if k in wanted})
        arguments: dict[str, Any] = {
            "UserPoolId": properties["UserPoolId"],
            "ClientName": properties.get("ClientName") or resource.logical_id,
            "GenerateSecret": bool(properties.get("GenerateSecret", False)),
        }
        for key in ("ExplicitAuthFlows", "ReadAttributes", "WriteAttributes", "PreventUserExistenceErrors"):
            if key in properties:
                arguments[key] = properties[key]
        client = self.client("cognito-idp").create_user_pool_client(**arguments)["UserPoolClient"]
        self.created.user_pool_clients[resource.logical_id] = client["ClientId"]
        self.resolver.refs[resource.logical_id] = client["ClientId"]

    def _queue(self, resource: Resource) -> None:
        properties = self.resolver.resolve(
            {k: v for k, v in resource.properties.items() if k != "RedrivePolicy"}
        )
        name = _name(self.resolver, resource, properties.get("QueueName"))
        attributes = {
            key: str(properties[key])
            for key in (
                "VisibilityTimeout",
                "MessageRetentionPeriod",
                "DelaySeconds",
                "ReceiveMessageWaitTimeSeconds",
            )
            if key in properties
        }
        sqs = self.client("sqs")
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.created.queues[resource.logical_id] = url
        self.resolver.refs[resource.logical_id] = url  # Ref of a queue is its URL
        self.resolver.attributes[(resource.logical_id, "Arn")] = arn
        self.resolver.attributes[(resource.logical_id, "QueueUrl")] = url
        self.resolver.attributes[(resource.logical_id, "QueueName")] = name

    def _redrive(self, resource: Resource) -> None:
        # After every queue exists: a redrive policy names its DLQ by Fn::GetAtt Arn.
        policy = resource.properties.get("RedrivePolicy")
        if not policy:
            return
        resolved = self.resolver.resolve(policy)
        self.client("sqs").set_queue_attributes(
            QueueUrl=self.created.queues[resource.logical_id],
            Attributes={"RedrivePolicy": json.dumps({k: str(v) for k, v in resolved.items()})},
        )


def _generate(spec: dict[str, Any]) -> str:
    """A value the way GenerateSecretString would make one (or a JSON object with it)."""
    alphabet = string.ascii_letters + string.digits
    if not spec.get("ExcludePunctuation"):
        alphabet += "!#$%&()*+,-.:;<=>?@[]^_{|}~"
    excluded = set(spec.get("ExcludeCharacters", ""))
    alphabet = "".join(c for c in alphabet if c not in excluded)
    value = "".join(secrets.choice(alphabet) for _ in range(int(spec.get("PasswordLength", 32))))
    template, key = spec.get("SecretStringTemplate"), spec.get("GenerateStringKey")
    if template and key:
        document = json.loads(template)
        document[key] = value
        return json.dumps(document)
    return value
