"""ConnectionGateway on API Gateway's management API (`apigatewaymanagementapi`).

The client is made with the stage's callback URL as its endpoint (from the template, through the
function's settings), never from boto3's defaults: with AWS_ENDPOINT_URL pointing at moto in local
mode, a default client would reach moto's stub and every post would silently "succeed".
Its retries are few and its timeouts short: a push that cannot be delivered now is worthless
later, and the client re-reads the job when it needs the truth.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from shared.adapters.dynamo_errors import error_code
from shared.realtime_ports import PostOutcome

if TYPE_CHECKING:
    from mypy_boto3_apigatewaymanagementapi import ApiGatewayManagementApiClient

GONE = "GoneException"
CLIENT_CONFIG = Config(connect_timeout=2, read_timeout=5, retries={"mode": "standard", "max_attempts": 2})


class ManagementApiGateway:
    """Posts to and closes connections of one WebSocket stage."""

    def __init__(self, client: ApiGatewayManagementApiClient) -> None:
        self._client = client

    def post(self, connection_id: str, data: str) -> PostOutcome:
        """PostToConnection; 410 is GONE, any other failure FAILED (the caller logs and counts it)."""
        try:
            self._client.post_to_connection(ConnectionId=connection_id, Data=data.encode("utf-8"))
        except ClientError as error:
            return PostOutcome.GONE if error_code(error) == GONE else PostOutcome.FAILED
        except BotoCoreError:
            return PostOutcome.FAILED  # no answer (timeout, connection refused)
        return PostOutcome.SENT

    def close(self, connection_id: str) -> None:
        """DeleteConnection; a connection that is already gone needs no closing."""
        try:
            self._client.delete_connection(ConnectionId=connection_id)
        except ClientError as error:
            if error_code(error) != GONE:
                raise
