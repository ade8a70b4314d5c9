"""Enforcement: the stack's side of local IAM (role files, the pollers' clients, the denial report,
roles re-read when the template changes), on a small template against moto."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from outlast.local.iam.enforcement import Enforcement, denial_count, denial_summary
from outlast.local.iam.roles import ENV_ROLE_FILE, access_key_id, local_where
from outlast.local.template import Resolver, Template
from tests.support.aws import REGION

QUEUE = "iam-enforcement-queue"


def _template(actions: list[str]) -> dict[str, Any]:
    return {
        "Resources": {
            "Queue": {"Type": "AWS::SQS::Queue", "Properties": {}},
            "Worker": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Handler": "functions.worker.handler.lambda_handler",
                    "Role": {"Fn::GetAtt": ["WorkerRole", "Arn"]},
                },
            },
            "WorkerRole": {"Type": "AWS::IAM::Role", "Properties": {}},
            "WorkerPolicy": {
                "Type": "AWS::IAM::Policy",
                "Properties": {
                    "Roles": [{"Ref": "WorkerRole"}],
                    "PolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Action": actions,
                                "Resource": {"Fn::GetAtt": ["Queue", "Arn"]},
                            }
                        ],
                    },
                },
            },
        }
    }


@pytest.fixture
def queue_url(moto_endpoint: str) -> str:
    sqs = boto3.client("sqs", endpoint_url=moto_endpoint, region_name=REGION)
    url: str = sqs.create_queue(QueueName=QUEUE)["QueueUrl"]
    return url


def _enforcement(tmp_path: Path, lines: list[str], queue_url: str) -> tuple[Enforcement, Path]:
    path = tmp_path / "cdk.out" / "template.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_template(["sqs:SendMessage"])))
    template = Template.load(path)
    resolver = Resolver(template)
    resolver.refs.update({"Worker": "outlast-worker", "WorkerRole": "WorkerRole", "Queue": queue_url})
    resolver.attributes[("Queue", "Arn")] = f"arn:aws:sqs:{REGION}:123456789012:{QUEUE}"
    where = local_where({}, {})
    return Enforcement(template, resolver, tmp_path / "iam", where, lines.append), path


def test_a_function_gets_its_role_file_and_its_own_key(tmp_path: Path, queue_url: str) -> None:
    enforcement, _ = _enforcement(tmp_path, [], queue_url)

    environment = enforcement.environment("Worker")

    assert Path(environment[ENV_ROLE_FILE]).is_file()
    assert environment["AWS_ACCESS_KEY_ID"] == access_key_id("WorkerRole")
    assert enforcement.describe()["accessKeys"] == {
        access_key_id("WorkerRole"): {"role": "WorkerRole", "functions": ["Worker"]}
    }


def test_a_poller_acts_as_its_function_and_its_denials_are_logged(
    tmp_path: Path, moto_endpoint: str, queue_url: str
) -> None:
    # Given the worker's poller client, whose role may send but not receive
    lines: list[str] = []
    enforcement, _ = _enforcement(tmp_path, lines, queue_url)
    sqs = enforcement.client("Worker", "sqs", moto_endpoint)
    sqs.send_message(QueueUrl=queue_url, MessageBody="{}")

    # When it receives
    with pytest.raises(ClientError):
        sqs.receive_message(QueueUrl=queue_url)

    # Then the denial is recorded, and the next poll logs it once
    state = {"iam": enforcement.describe()}
    assert denial_count(state) == 1
    enforcement.poll()
    enforcement.poll()
    assert lines == denial_summary(state)
    assert "sqs:ReceiveMessage" in lines[0]


def test_a_changed_template_changes_the_roles_of_the_running_stack(
    tmp_path: Path, moto_endpoint: str, queue_url: str
) -> None:
    # Given a running stack's poller that may not receive
    lines: list[str] = []
    enforcement, template = _enforcement(tmp_path, lines, queue_url)
    sqs = enforcement.client("Worker", "sqs", moto_endpoint)

    # When the template is rewritten with the grant, and the stack polls
    template.write_text(json.dumps(_template(["sqs:SendMessage", "sqs:ReceiveMessage"])))
    enforcement.poll()

    # Then the role was re-read, and the same client may receive now
    assert lines == ["[iam] Worker: role re-read from the changed template"]
    sqs.receive_message(QueueUrl=queue_url)


def test_a_half_written_template_is_read_again_later(tmp_path: Path, queue_url: str) -> None:
    lines: list[str] = []
    enforcement, template = _enforcement(tmp_path, lines, queue_url)

    template.write_text('{"Resources": {')
    enforcement.poll()

    assert lines[0].startswith("[iam] the template changed, but its roles could not be read yet")


def test_a_request_signed_by_a_roles_key_is_authorized_as_that_role_and_a_refusal_is_logged(
    tmp_path: Path, queue_url: str
) -> None:
    # Given a role that may send to the queue, and nothing else (the upload front asks this way)
    lines: list[str] = []
    enforcement, _ = _enforcement(tmp_path, lines, queue_url)
    queue = f"arn:aws:sqs:{REGION}:123456789012:{QUEUE}"
    key = access_key_id("WorkerRole")

    # Then what the role allows passes, and what it does not is refused and recorded as a denial
    assert enforcement.authorize(key, "sqs:SendMessage", queue, "sqs.SendMessage")
    assert not enforcement.authorize(key, "s3:PutObject", "arn:aws:s3:::bucket/key", "s3.PostObject")
    assert not enforcement.authorize("ASIAUNKNOWN", "sqs:SendMessage", queue, "sqs.SendMessage")
    state = {"iam": enforcement.describe()}
    assert denial_count(state) == 1
    assert "s3:PutObject" in denial_summary(state)[0]
