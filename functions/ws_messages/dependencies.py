"""The composition root of the messages function (the WebSocket `$default` route).

There is nothing to connect yet: the route answers from the message alone and its role may do
nothing but write its logs, so it reads no settings and creates no client. The root is here so
that the function is built like its siblings: whatever the route comes to need (a store, the
stage's management API) is wired here, once per container, and never in the handler.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from shared.realtime import answer_message


class MessageAnswerer(Protocol):
    """The route's reply to one message body (None when the frame had none)."""

    def __call__(self, body: str | None) -> dict[str, Any]: ...


@dataclass(frozen=True)
class MessagesDependencies:
    """How a message is answered."""

    answer: MessageAnswerer


@cache
def build_dependencies() -> MessagesDependencies:
    """Wire the route once per container (it has no settings and no clients)."""
    return MessagesDependencies(answer=answer_message)
