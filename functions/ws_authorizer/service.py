"""The authorizer's decision: a live ticket is consumed and allows this one connect.

The answer is an IAM policy on the `$connect` route the request names (`methodArn`): Allow with the
owner in the context (API Gateway hands it to every later route of the connection), or Deny for
a missing, used, expired or made-up ticket. Deny, not an error: API Gateway answers 403 either
way, and a raised error would count as a function failure on every bad ticket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from functions.ws_authorizer.dependencies import AuthorizerDependencies
from shared.job import Caller
from shared.observability import logger, metrics
from shared.realtime import TICKET_QUERY_PARAMETER, authorizer_context, is_ticket_shaped, ticket_hash

_DENIED_PRINCIPAL = "anonymous"


@dataclass(frozen=True)
class ConnectRequest:
    """The part of the authorizer's REQUEST event the decision reads."""

    method_arn: str
    ticket: str | None

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> ConnectRequest:
        """Parse the event (the ticket is never logged, nor the query string that holds it)."""
        query = event.get("queryStringParameters") or {}
        ticket = query.get(TICKET_QUERY_PARAMETER)
        return cls(
            method_arn=str(event.get("methodArn", "")), ticket=ticket if isinstance(ticket, str) else None
        )


def policy(
    principal: str, effect: str, resource: str, context: dict[str, str] | None = None
) -> dict[str, Any]:
    """An authorizer answer: an IAM policy on one execute-api resource, and the context."""
    answer: dict[str, Any] = {
        "principalId": principal,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": effect, "Resource": resource}],
        },
    }
    if context:
        answer["context"] = context
    return answer


def authorize(deps: AuthorizerDependencies, request: ConnectRequest) -> dict[str, Any]:
    """Consume the ticket (one conditional delete) and allow this connect, or deny it."""
    owner: Caller | None = None
    if is_ticket_shaped(request.ticket) and request.ticket is not None:
        owner = deps.store.take_ticket(ticket_hash(request.ticket), deps.clock.now())
    if owner is None:
        logger.info("connect denied")
        metrics.add_metric(name="ConnectsDenied", unit="Count", value=1)
        return policy(_DENIED_PRINCIPAL, "Deny", request.method_arn)
    logger.info("connect allowed", extra={"tenant": owner.tenant, "sub": owner.sub})
    return policy(owner.sub, "Allow", request.method_arn, authorizer_context(owner))
