"""function_roles(): each function's permissions, read from the template (outlast.local.iam.roles)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from outlast.local.iam.requests import Where
from outlast.local.iam.roles import FunctionRole, RoleFile, access_key_id, function_roles, local_where
from outlast.local.template import Resolver, Template, TemplateError

TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"
WHERE = Where(region="us-east-1", account="123456789012")


def statement(action: str, resource: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource}


def document(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def function(role: str, handler: str = "functions.worker.handler.lambda_handler") -> dict[str, Any]:
    return {
        "Type": "AWS::Lambda::Function",
        "Properties": {"Handler": handler, "Role": {"Fn::GetAtt": [role, "Arn"]}},
    }


def template(resources: dict[str, Any]) -> tuple[Template, Resolver]:
    body = {"Resources": {"Table": {"Type": "AWS::DynamoDB::Table", "Properties": {}}, **resources}}
    loaded = Template(path=Path("template.json"), body=body)
    resolver = Resolver(loaded)
    for logical_id in body["Resources"]:
        resolver.refs[logical_id] = logical_id
    resolver.refs["Worker"] = "outlast-worker"
    resolver.attributes[("Table", "Arn")] = TABLE_ARN
    return loaded, resolver


def roles(resources: dict[str, Any]) -> list[FunctionRole]:
    loaded, resolver = template(resources)
    return list(function_roles(loaded, resolver, WHERE, Path("denials.jsonl")))


ROLE = {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {}}}


def test_a_policy_attached_to_the_role_is_resolved_to_local_arns() -> None:
    # Given a function whose role has a CDK DefaultPolicy naming the table by Fn::GetAtt
    (found,) = roles(
        {
            "Worker": function("WorkerRole"),
            "WorkerRole": ROLE,
            "WorkerPolicy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "Roles": [{"Ref": "WorkerRole"}],
                    "PolicyDocument": document(
                        statement("dynamodb:GetItem", {"Fn::GetAtt": ["Table", "Arn"]})
                    ),
                },
            },
            "OtherPolicy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "Roles": [{"Ref": "OtherRole"}],
                    "PolicyDocument": document(statement("*", "*")),
                },
            },
        }
    )

    # Then the function's role has that policy, with the local ARN, and nothing of another role's
    assert found.function == "Worker"
    assert found.function_name == "outlast-worker"
    assert found.role == "WorkerRole"
    assert found.documents == (document(statement("dynamodb:GetItem", TABLE_ARN)),)
    assert found.principal == "arn:aws:sts::123456789012:assumed-role/WorkerRole/outlast-worker"
    assert found.unmodeled == ()


def test_inline_and_customer_managed_policies_count_too() -> None:
    managed = document(statement("sqs:SendMessage", "*"))
    inline = document(statement("s3:GetObject", "*"))
    attached = document(statement("s3:PutObject", "*"))
    (found,) = roles(
        {
            "Worker": function("WorkerRole"),
            "WorkerRole": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "Policies": [{"PolicyName": "inline", "PolicyDocument": inline}],
                    "ManagedPolicyArns": [
                        {"Ref": "Managed"},
                        "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
                    ],
                },
            },
            "Managed": {"Type": "AWS::IAM::ManagedPolicy", "Properties": {"PolicyDocument": managed}},
            "Attached": {
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {"Roles": [{"Ref": "WorkerRole"}], "PolicyDocument": attached},
            },
        }
    )

    assert sorted(found.documents, key=str) == sorted([managed, inline, attached], key=str)
    # An AWS-managed policy is not in the template: none of its grants apply, and that is said
    assert found.unmodeled == ("arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",)


def test_cdk_helper_functions_are_not_ours() -> None:
    assert roles({"Helper": function("HelperRole", handler="index.handler"), "HelperRole": ROLE}) == []


def test_a_permissions_boundary_is_refused_rather_than_ignored() -> None:
    bounded = {"Type": "AWS::IAM::Role", "Properties": {"PermissionsBoundary": "arn:aws:iam::1:policy/b"}}

    with pytest.raises(TemplateError, match="permissions boundary"):
        roles({"Worker": function("WorkerRole"), "WorkerRole": bounded})


def test_each_role_has_its_own_stable_access_key_id() -> None:
    assert access_key_id("WorkerRole") == access_key_id("WorkerRole")
    assert access_key_id("WorkerRole") != access_key_id("SubmitRole")
    assert access_key_id("WorkerRole").startswith("ASIA")
    assert len(access_key_id("WorkerRole")) == 20


def test_a_role_file_round_trips_and_is_reread_when_it_changes(tmp_path: Path) -> None:
    where = local_where(
        {"http://127.0.0.1:1/ws": ("api", "live")},
        {"Secret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:outlast-key-AbCdEf"},
    )
    role = FunctionRole("Worker", "w", "WorkerRole", "WorkerRole", (document(),), where, "d.jsonl")
    file = RoleFile(tmp_path / "role.json")

    assert file.write(role)
    assert not file.write(role)  # unchanged: not rewritten
    assert file.current() == role
    assert file.current().where.secrets == {"outlast-key": where.secrets["outlast-key"]}

    changed = FunctionRole(
        "Worker", "w", "WorkerRole", "WorkerRole", (document(statement("*", "*")),), where, "d"
    )
    file.write(changed)
    assert file.current() == changed
