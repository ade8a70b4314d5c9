"""The IAM guard on real botocore clients against moto: what a role allows goes through, the rest
fails the way AWS fails it (outlast.local.iam.guard)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore import handlers
from botocore.exceptions import ClientError

from outlast.local.iam.denials import DenialLog
from outlast.local.iam.guard import Guard
from outlast.local.iam.requests import Where
from outlast.local.iam.roles import FunctionRole, RoleFile
from tests.support.aws import REGION

if TYPE_CHECKING:
    from tests.support.aws import TestResources

ACCOUNT = "123456789012"
WHERE = Where(region=REGION, account=ACCOUNT)


def table_arn(name: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"


def allow(actions: list[str], resources: list[str]) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions, "Resource": resources}


class Role:
    """A function's role file in a temporary directory, and its denial log."""

    def __init__(self, directory: Path) -> None:
        self.file = directory / "role.json"
        self.denials = DenialLog(directory / "denials.jsonl")

    def grant(self, *statements: dict[str, Any]) -> Path:
        role = FunctionRole(
            function="WorkerFunction",
            function_name="outlast-worker",
            role="WorkerRole",
            role_name="WorkerRole",
            documents=({"Version": "2012-10-17", "Statement": list(statements)},),
            where=WHERE,
            denials=str(self.denials.path),
        )
        RoleFile(self.file).write(role)
        return self.file


@pytest.fixture
def role(tmp_path: Path) -> Role:
    return Role(tmp_path)


def guarded(service: str, endpoint: str, role_file: Path) -> Any:
    client = boto3.client(service, endpoint_url=endpoint, region_name=REGION)  # type: ignore[call-overload]
    Guard.of_file(role_file).install(client.meta.events)
    return client


def open_client(service: str, endpoint: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION)  # type: ignore[call-overload]


def key(job: str) -> dict[str, Any]:
    return {"pk": {"S": f"JOB#{job}"}, "sk": {"S": "JOB"}}


def error_of(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response: Any = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


class TestDynamoDB:
    def test_a_granted_call_reaches_the_table(
        self, moto_endpoint: str, resources: TestResources, role: Role
    ) -> None:
        # Given a role that may read the jobs table
        file = role.grant(allow(["dynamodb:GetItem"], [table_arn(resources.jobs_table)]))
        client = guarded("dynamodb", moto_endpoint, file)

        # When it reads an item
        found = client.get_item(TableName=resources.jobs_table, Key=key("a"))

        # Then moto answered, and nothing was denied
        assert found["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert role.denials.read() == []

    def test_an_ungranted_call_fails_as_in_aws_and_is_never_sent(
        self, moto_endpoint: str, resources: TestResources, role: Role
    ) -> None:
        # Given a role that may only read
        file = role.grant(allow(["dynamodb:GetItem"], [table_arn(resources.jobs_table)]))
        client = guarded("dynamodb", moto_endpoint, file)

        # When it writes
        with pytest.raises(ClientError) as caught:
            client.put_item(TableName=resources.jobs_table, Item=key("a"))

        # Then botocore raised DynamoDB's AccessDeniedException (HTTP 400), with AWS's message
        assert error_of(caught) == ("AccessDeniedException", 400)
        message = caught.value.response["Error"]["Message"]
        principal = f"arn:aws:sts::{ACCOUNT}:assumed-role/WorkerRole/outlast-worker"
        assert message == (
            f"User: {principal} is not authorized to perform: dynamodb:PutItem on resource: "
            f"{table_arn(resources.jobs_table)} because no identity-based policy allows the "
            "dynamodb:PutItem action"
        )
        # And the item was never written
        assert "Item" not in open_client("dynamodb", moto_endpoint).get_item(
            TableName=resources.jobs_table, Key=key("a")
        )
        # And the denial is on record, with the function, the action and the resource
        (denial,) = role.denials.read()
        assert (denial.function, denial.action, denial.resource, denial.call) == (
            "WorkerFunction",
            "dynamodb:PutItem",
            table_arn(resources.jobs_table),
            "dynamodb.PutItem",
        )

    def test_a_transaction_is_checked_item_by_item(
        self, moto_endpoint: str, resources: TestResources, role: Role
    ) -> None:
        # Given a role that may update either table but delete from none
        tables = [table_arn(resources.jobs_table), table_arn(resources.budgets_table)]
        file = role.grant(allow(["dynamodb:UpdateItem"], tables))
        client = guarded("dynamodb", moto_endpoint, file)

        # When one transaction updates one item and deletes another
        with pytest.raises(ClientError) as caught:
            client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": resources.jobs_table,
                            "Key": key("a"),
                            "UpdateExpression": "SET n = :n",
                            "ExpressionAttributeValues": {":n": {"N": "1"}},
                        }
                    },
                    {"Delete": {"TableName": resources.budgets_table, "Key": key("b")}},
                ]
            )

        # Then the whole call is refused for the delete, and nothing was written
        assert error_of(caught) == ("AccessDeniedException", 400)
        assert [d.action for d in role.denials.read()] == ["dynamodb:DeleteItem"]
        assert "Item" not in open_client("dynamodb", moto_endpoint).get_item(
            TableName=resources.jobs_table, Key=key("a")
        )

    def test_an_explicit_deny_says_so(self, moto_endpoint: str, resources: TestResources, role: Role) -> None:
        file = role.grant(
            allow(["dynamodb:*"], ["*"]),
            {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": table_arn(resources.jobs_table)},
        )
        client = guarded("dynamodb", moto_endpoint, file)

        with pytest.raises(ClientError) as caught:
            client.delete_item(TableName=resources.jobs_table, Key=key("a"))

        assert caught.value.response["Error"]["Message"].endswith(
            "with an explicit deny in an identity-based policy"
        )

    def test_a_call_local_mode_cannot_map_is_denied_not_waved_through(
        self, moto_endpoint: str, resources: TestResources, role: Role
    ) -> None:
        # Given a role that may do anything on DynamoDB
        file = role.grant(allow(["dynamodb:*"], ["*"]))
        client = guarded("dynamodb", moto_endpoint, file)

        # When the code calls an operation local mode has no mapping for
        with pytest.raises(ClientError) as caught:
            client.describe_time_to_live(TableName=resources.jobs_table)

        # Then it is denied, and the message says where to teach local mode about it
        assert error_of(caught) == ("AccessDeniedException", 400)
        assert "outlast/local/iam/requests.py" in caught.value.response["Error"]["Message"]
        assert [d.action for d in role.denials.read()] == ["dynamodb:DescribeTimeToLive"]

    def test_a_changed_role_file_applies_to_the_next_call(
        self, moto_endpoint: str, resources: TestResources, role: Role
    ) -> None:
        # Given a client whose role may only read
        file = role.grant(allow(["dynamodb:GetItem"], [table_arn(resources.jobs_table)]))
        client = guarded("dynamodb", moto_endpoint, file)
        with pytest.raises(ClientError):
            client.put_item(TableName=resources.jobs_table, Item=key("a"))

        # When the role file is rewritten with the write granted
        role.grant(allow(["dynamodb:GetItem", "dynamodb:PutItem"], [table_arn(resources.jobs_table)]))

        # Then the same client may write now
        client.put_item(TableName=resources.jobs_table, Item=key("a"))


class TestS3:
    def _role(self, role: Role, bucket: str, *, list_bucket: bool) -> Path:
        statements = [allow(["s3:GetObject"], [f"arn:aws:s3:::{bucket}/inputs/*"])]
        if list_bucket:
            statements.append(allow(["s3:ListBucket"], [f"arn:aws:s3:::{bucket}"]))
        return role.grant(*statements)

    def test_a_key_outside_the_granted_prefix_is_denied_with_403(
        self, moto_endpoint: str, resources: TestResources, role: Role
    ) -> None:
        open_client("s3", moto_endpoint).put_object(Bucket=resources.bucket, Key="results/j.json", Body=b"{}")
        client = guarded("s3", moto_endpoint, self._role(role, resources.bucket, list_bucket=True))

        with pytest.raises(ClientError) as caught:
            client.get_object(Bucket=resources.bucket, Key="results/j.json")

        assert error_of(caught) == ("AccessDenied", 403)

    def test_an_object_under_the_granted_prefix_is_read(
        self, moto_endpoint: str, resources: TestResources, role: Role
    ) -> None:
        open_client("s3", moto_endpoint).put_object(Bucket=resources.bucket, Key="inputs/j.json", Body=b"{}")
        client = guarded("s3", moto_endpoint, self._role(role, resources.bucket, list_bucket=False))

        assert client.get_object(Bucket=resources.bucket, Key="inputs/j.json")["Body"].read() == b"{}"

    @pytest.mark.parametrize(
        ("list_bucket", "errors"),
        [
            pytest.param(True, [("NoSuchKey", 404), ("404", 404)], id="may-list"),
            pytest.param(False, [("AccessDenied", 403), ("403", 403)], id="may-not-list"),
        ],
    )
    def test_a_missing_key_is_404_only_to_a_role_that_may_list_the_bucket(
        self,
        moto_endpoint: str,
        resources: TestResources,
        role: Role,
        list_bucket: bool,
        errors: list[tuple[str, int]],
    ) -> None:
        client = guarded("s3", moto_endpoint, self._role(role, resources.bucket, list_bucket=list_bucket))

        with pytest.raises(ClientError) as get:
            client.get_object(Bucket=resources.bucket, Key="inputs/missing.json")
        with pytest.raises(ClientError) as head:
            client.head_object(Bucket=resources.bucket, Key="inputs/missing.json")

        assert [error_of(get), error_of(head)] == errors
        assert len(role.denials.read()) == (0 if list_bucket else 2)


class TestSecretsAndQueues:
    def test_a_secret_read_needs_its_grant(
        self, moto_endpoint: str, resources: TestResources, role: Role
    ) -> None:
        file = role.grant(
            allow(["secretsmanager:GetSecretValue"], ["arn:aws:secretsmanager:*:*:secret:other-*"])
        )
        client = guarded("secretsmanager", moto_endpoint, file)

        with pytest.raises(ClientError) as caught:
            client.get_secret_value(SecretId=resources.cursor_secret_arn)

        assert error_of(caught) == ("AccessDeniedException", 400)

    def test_a_batch_send_is_authorized_as_send_message(self, moto_endpoint: str, role: Role) -> None:
        url = open_client("sqs", moto_endpoint).create_queue(QueueName="iam-guard-queue")["QueueUrl"]
        file = role.grant(allow(["sqs:SendMessage"], [f"arn:aws:sqs:{REGION}:{ACCOUNT}:iam-guard-queue"]))
        client = guarded("sqs", moto_endpoint, file)

        sent = client.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "{}"}])
        with pytest.raises(ClientError) as caught:
            client.receive_message(QueueUrl=url)

        assert [entry["Id"] for entry in sent["Successful"]] == ["1"]
        assert error_of(caught) == ("AccessDenied", 403)


@pytest.fixture
def every_session() -> Iterator[None]:
    """Undo install_in_every_session (it changes botocore's built-in handlers for the process)."""
    before = list(handlers.BUILTIN_HANDLERS)
    yield
    handlers.BUILTIN_HANDLERS[:] = before


@pytest.mark.usefixtures("every_session")
def test_installed_in_every_session_it_guards_clients_made_later(
    moto_endpoint: str, resources: TestResources, role: Role
) -> None:
    # Given the guard installed the way a function process installs it
    role_file = role.grant(allow(["dynamodb:GetItem"], [table_arn(resources.jobs_table)]))
    Guard.of_file(role_file).install_in_every_session()

    # When code makes its own session and client afterwards, as the functions do
    client = boto3.session.Session().client("dynamodb", endpoint_url=moto_endpoint, region_name=REGION)

    # Then its calls are checked
    client.get_item(TableName=resources.jobs_table, Key=key("a"))
    with pytest.raises(ClientError):
        client.put_item(TableName=resources.jobs_table, Item=key("a"))


def test_uninstalled_from_a_session_it_no_longer_guards_its_new_clients(
    moto_endpoint: str, resources: TestResources, role: Role
) -> None:
    # Given a session whose clients are guarded by a role that may not write
    session = boto3.session.Session(region_name=REGION)
    guard = Guard.of_file(role.grant(allow(["dynamodb:GetItem"], [table_arn(resources.jobs_table)])))
    guard.install(session.events)
    with pytest.raises(ClientError):
        session.client("dynamodb", endpoint_url=moto_endpoint).put_item(
            TableName=resources.jobs_table, Item=key("a")
        )

    # When the guard is taken off (as the benchmark harness does when it stops)
    guard.uninstall(session.events)

    # Then a client made there afterwards is not checked
    session.client("dynamodb", endpoint_url=moto_endpoint).put_item(
        TableName=resources.jobs_table, Item=key("a")
    )
