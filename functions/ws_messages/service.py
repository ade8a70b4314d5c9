"""Answer one message of the WebSocket `$default` route: a pong to a ping, an error frame to
anything else (shared.realtime.answer_message). The answer goes back as the route response, so a
client learns of a malformed or unknown action instead of hearing nothing."""

from __future__ import annotations

import json
from typing import Any

from functions.ws_messages.dependencies import MessagesDependencies


def handle(deps: MessagesDependencies, body: str | None) -> dict[str, Any]:
    """The route response carrying the answer to `body`."""
    return {"statusCode": 200, "body": json.dumps(deps.answer(body))}
