"""$connect records the connection under its owner (closing the oldest beyond 10); $disconnect forgets it."""

from __future__ import annotations

from typing import Any

from functions.ws_connections.dependencies import ConnectionsDependencies
from shared.observability import logger, metrics
from shared.realtime import Connection, RouteEvent, connections_to_close

OK = {"statusCode": 200}
FORBIDDEN = {"statusCode": 403}


def connect(deps: ConnectionsDependencies, event: RouteEvent) -> dict[str, Any]:
    """Record the connection, then close (and forget) the owner's oldest beyond the newest 10."""
    if event.owner is None or not event.connection_id:
        # Only the ticket authorizer lets a connect through, and it always names the owner.
        logger.error("connect without an owner in the authorizer context")
        return FORBIDDEN
    deps.store.add_connection(
        Connection(connection_id=event.connection_id, owner=event.owner, connected_at=event.connected_at)
    )
    closed = 0
    for oldest in connections_to_close(deps.store.connections_of(event.owner)):
        if oldest.connection_id == event.connection_id:
            continue  # never the one being opened (a clock skew could make it look oldest)
        deps.gateway.close(oldest.connection_id)
        deps.store.remove_connection(event.owner, oldest.connection_id)
        closed += 1
    if closed:
        metrics.add_metric(name="ConnectionsClosedOverLimit", unit="Count", value=closed)
    logger.info("connected", extra={"connection_id": event.connection_id, "closed_oldest": closed})
    return OK


def disconnect(deps: ConnectionsDependencies, event: RouteEvent) -> dict[str, Any]:
    """Forget the connection ($disconnect is best-effort in API Gateway: TTL and 410s catch the rest)."""
    if event.owner is not None and event.connection_id:
        deps.store.remove_connection(event.owner, event.connection_id)
    logger.info("disconnected", extra={"connection_id": event.connection_id})
    return OK


def handle(deps: ConnectionsDependencies, event: RouteEvent) -> dict[str, Any]:
    """Route by the route key API Gateway sets."""
    if event.route_key == "$connect":
        return connect(deps, event)
    if event.route_key == "$disconnect":
        return disconnect(deps, event)
    logger.error("unexpected route", extra={"route_key": event.route_key})
    return {"statusCode": 400}
