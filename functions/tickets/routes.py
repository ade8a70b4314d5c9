"""The ticket route on the Powertools HTTP API resolver (the OpenAPI document comes from here)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from functions.tickets.dependencies import TicketsDependencies
from functions.tickets.service import issue_ticket
from shared.http import create_resolver, current_caller, json_response
from shared.openapi_responses import json_response as json_entry
from shared.openapi_responses import problem_responses
from shared.realtime import TicketDocument

app = create_resolver()


@app.post(
    "/v1/realtime/tickets",
    summary="Get a ticket for live updates",
    description=(
        "A single-use ticket, good for 60 seconds, and the WebSocket URL that carries it: open `url` "
        'to receive `{"type": "job", "job": <status document>}` for each change of the caller\'s '
        "jobs. No ID token travels in the URL."
    ),
    operation_id="createRealtimeTicket",
    tags=["realtime"],
    responses={
        201: json_entry("A fresh ticket; open `url` within `expiresAt`.", TicketDocument),
        **problem_responses(),
    },
)
def create_ticket() -> Response[Any]:
    """A ticket for the caller."""
    deps: TicketsDependencies = app.context["deps"]
    return json_response(201, issue_ticket(deps, current_caller(app)))
