"""The ticket route and the WebSocket route handlers on moto, driven by the samples in events/."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from functions.tickets.handler import lambda_handler as tickets_handler
from functions.ws_authorizer.handler import lambda_handler as authorizer_handler
from functions.ws_connections.handler import lambda_handler as connections_handler
from functions.ws_messages.handler import lambda_handler as messages_handler
from outlast.local.websocket_front import ConnectionRegistry, ManagementApi
from shared import resources as r
from shared.adapters.dynamodb_connections import DynamoConnectionStore
from shared.job import Caller
from shared.realtime import ticket_hash
from tests.support.aws import REGION, create_connections_table
from tests.support.events import api_event, load_event
from tests.support.lambda_context import FakeLambdaContext

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore:No application metrics")]

OWNER = Caller(tenant="acme", sub="3b7c1d2e-8f4a-4c6b-9d1e-2f3a4b5c6d7e")  # the samples' caller
WEBSOCKET_URL = "wss://ws123.execute-api.us-east-1.amazonaws.com/live"


@pytest.fixture
def table(resources: TestResources, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    assert resources
    name = create_connections_table(os.environ["AWS_ENDPOINT_URL"])
    management = ManagementApi(ConnectionRegistry(), log=lambda _line: None).start()
    monkeypatch.setenv(r.ENV_CONNECTIONS_TABLE, name)
    monkeypatch.setenv(r.ENV_WEBSOCKET_URL, WEBSOCKET_URL)
    monkeypatch.setenv(r.ENV_CONNECTIONS_ENDPOINT, management.url)
    yield name
    management.stop()


def _store(table: str) -> DynamoConnectionStore:
    client = boto3.client("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=REGION)
    return DynamoConnectionStore(client, table)


def _items(table: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=REGION)
    return list(client.scan(TableName=table, ConsistentRead=True)["Items"])


def _ticket() -> dict[str, Any]:
    answer = tickets_handler(api_event("create_ticket"), FakeLambdaContext())
    assert answer["statusCode"] == 201, answer
    body: dict[str, Any] = json.loads(answer["body"])
    return body


def _authorize(ticket: str | None) -> dict[str, Any]:
    event = load_event("ws_authorizer")
    event["queryStringParameters"] = {} if ticket is None else {"ticket": ticket}
    answer: dict[str, Any] = authorizer_handler(event, FakeLambdaContext())
    return answer


def test_a_ticket_is_stored_as_its_hash_with_its_owner(table: str) -> None:
    body = _ticket()

    assert set(body) == {"ticket", "url", "expiresAt"}
    assert body["url"] == f"{WEBSOCKET_URL}?ticket={body['ticket']}"
    (item,) = _items(table)
    assert item[r.CONNECTIONS_PARTITION_KEY]["S"] == f"TICKET#{ticket_hash(body['ticket'])}"
    assert body["ticket"] not in json.dumps(item)
    assert (item["tenant"]["S"], item["sub"]["S"]) == (OWNER.tenant, OWNER.sub)


def test_a_ticket_without_an_id_token_is_refused(table: str) -> None:
    answer = tickets_handler(api_event("create_ticket", claims=None), FakeLambdaContext())

    assert answer["statusCode"] == 401
    assert _items(table) == []


def test_the_authorizer_allows_a_ticket_once(table: str) -> None:
    ticket = _ticket()["ticket"]

    first, second = _authorize(ticket), _authorize(ticket)

    assert first["policyDocument"]["Statement"][0]["Effect"] == "Allow"
    assert first["policyDocument"]["Statement"][0]["Resource"] == load_event("ws_authorizer")["methodArn"]
    assert first["context"] == {"tenant": OWNER.tenant, "sub": OWNER.sub}
    assert second["policyDocument"]["Statement"][0]["Effect"] == "Deny"
    assert _items(table) == []


def test_connect_and_disconnect_keep_the_owners_connection_item(table: str) -> None:
    connected = connections_handler(load_event("ws_connect"), FakeLambdaContext())

    assert connected == {"statusCode": 200}
    (connection,) = _store(table).connections_of(OWNER)
    assert connection.connection_id == "FDmBIeapIAMCIQg="
    assert connection.connected_at.timestamp() == 1795957200

    assert connections_handler(load_event("ws_disconnect"), FakeLambdaContext()) == {"statusCode": 200}
    assert _store(table).connections_of(OWNER) == []


def test_an_eleventh_connect_closes_the_oldest_through_the_management_api(table: str) -> None:
    for index in range(11):
        event = copy.deepcopy(load_event("ws_connect"))
        event["requestContext"]["connectionId"] = f"conn-{index:02d}"
        event["requestContext"]["connectedAt"] = 1795957200000 + index
        assert connections_handler(event, FakeLambdaContext()) == {"statusCode": 200}

    # The oldest was gone at the management API already (410): closing it is still fine.
    ids = sorted(c.connection_id for c in _store(table).connections_of(OWNER))
    assert ids == [f"conn-{index:02d}" for index in range(1, 11)]


def test_a_ping_gets_a_pong() -> None:
    answer = messages_handler(load_event("ws_message"), FakeLambdaContext())

    assert answer == {"statusCode": 200, "body": json.dumps({"type": "pong"})}
