"""The call log (`GET /_calls`) and the tally (`GET /_tally`): what became of every chat call.

Each entry has `requestHash`, `started` and `finished` (epoch seconds), `status` (null when no
answer was sent), `outcome` (`ok`, the fault's name, `context_length_exceeded` for a call over
the context, `abandoned` for an answer its caller left before it was sent, `shutdown`,
`unauthorized`, `invalid_request`), `model`, `operation`, `promptVersion` (the template version
recognised, else null), `kind` (`single`, `map`, `reduce`, or null), and for map calls `part`
and `parts` (the 1-based part number and the number of parts the prompt names; null otherwise),
and `usage` (`inputTokens`, `outputTokens` of a completion that was sent; null otherwise).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from outlast.local.fake_model.answers import detect_operation, detect_template, part_of
from outlast.local.fake_model.requests import ChatRequest
from shared.prompts import PromptKind

_DESCRIPTION_KEYS = ("requestHash", "model", "operation", "promptVersion", "kind", "part", "parts")


@dataclass(frozen=True)
class CallOutcome:
    """What became of one chat call, for the call log."""

    outcome: str
    status: int | None
    request: ChatRequest | None = None
    usage: dict[str, int] | None = None  # the tokens of a completion that was sent

    def record(self, started: float, finished: float) -> dict[str, Any]:
        """The call's entry in `GET /_calls`."""
        entry: dict[str, Any] = {"started": started, "finished": finished, "status": self.status}
        entry["outcome"], entry["usage"] = self.outcome, self.usage
        return entry | (_describe(self.request) if self.request else dict.fromkeys(_DESCRIPTION_KEYS))


def _describe(request: ChatRequest) -> dict[str, Any]:
    """What the call log says about a request: its hash, and which prompt and part it is."""
    system = request.last("system")
    operation, template = detect_operation(system), detect_template(system)
    is_map = template is not None and template.kind is PromptKind.MAP
    part, parts = part_of(request.last("user")) if is_map else (None, None)
    return {
        "requestHash": request.request_hash,
        "model": request.model,
        "operation": operation.value if operation else None,
        "promptVersion": template.version if template else None,
        "kind": template.kind.value if template else None,
        "part": part,
        "parts": parts,
    }


def tally(calls: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """`GET /_tally`: the tokens served per request hash, from the call log (every completion the
    server sent, whether or not its caller read it: a killed worker's, an abandoned call's)."""
    served: dict[str, dict[str, int]] = {}
    for call in calls:
        usage = call.get("usage")
        if usage is None or call.get("requestHash") is None:
            continue
        total = served.setdefault(str(call["requestHash"]), {"calls": 0, "inputTokens": 0, "outputTokens": 0})
        total["calls"] += 1
        total["inputTokens"] += int(usage["inputTokens"])
        total["outputTokens"] += int(usage["outputTokens"])
    return served


class CallLog:
    """Every finished call in the order they finished, and how many are still running."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[dict[str, Any]] = []
        self._in_flight = 0

    def begin(self) -> None:
        """A call started."""
        with self._lock:
            self._in_flight += 1

    def end(self, record: dict[str, Any]) -> None:
        """A call finished, as `record` says."""
        with self._lock:
            self._in_flight -= 1
            self._calls.append(record)

    def calls(self) -> list[dict[str, Any]]:
        """The log so far (a copy)."""
        with self._lock:
            return list(self._calls)

    def reset(self) -> None:
        """Forget the log (`POST /_calls/reset`); calls in flight are still logged when they end."""
        with self._lock:
            self._calls.clear()

    @property
    def in_flight(self) -> int:
        """Calls started and not yet finished."""
        with self._lock:
            return self._in_flight
