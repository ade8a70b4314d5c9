"""Followers of the run's streaming jobs: one WebSocket per owner, and one of the second owner.

Each owner's socket follows that owner's streaming jobs as they are submitted and keeps every
output message it receives; the second owner's socket asks to follow the same jobs and must get
`job_not_found` and no output at all. After the drain the verifier checks that no output message
reached a connection of another owner (DESIGN.md, "Streaming output": owner only).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from outlast.api.http import HttpApi
from outlast.live import FollowAnswer, LiveUpdates, LiveUpdatesError, OutputPush, open_live

RECEIVE_SLICE_SECONDS = 0.5


@dataclass
class Received:
    """What one follower's socket got: output messages (job id, attempt, seq) and follow errors."""

    outputs: list[tuple[str, int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lost: str | None = None  # the socket failed (its owner's jobs are then checked through /output only)


class Follower:
    """One socket, read on its own thread; `follow` may be called from any thread."""

    def __init__(self, name: str, client: HttpApi) -> None:
        self.name = name
        self.received = Received()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._live: LiveUpdates | None = None
        try:
            self._live = open_live(client)
        except LiveUpdatesError as error:
            self.received.lost = str(error)
        self._thread = threading.Thread(target=self._read, name=f"chaos-follow-{name}", daemon=True)
        self._thread.start()

    def follow(self, job_id: str) -> None:
        """Follow a job's output from its start."""
        with self._lock:
            if self._live is None:
                return
            try:
                self._live.follow(job_id)
            except LiveUpdatesError as error:
                self.received.lost = str(error)

    def _read(self) -> None:
        live = self._live
        while live is not None and not self._stop.is_set():
            try:
                pushed = live.next_message(RECEIVE_SLICE_SECONDS)
            except LiveUpdatesError as error:
                self.received.lost = str(error)
                return
            if isinstance(pushed, OutputPush):
                self.received.outputs.append((pushed.job_id, pushed.attempt, pushed.seq))
            elif isinstance(pushed, FollowAnswer) and pushed.kind == "error":
                self.received.errors.append(pushed.code or "error")

    def close(self) -> Received:
        """Stop reading and close the socket; what it received."""
        self._stop.set()
        self._thread.join(timeout=5)
        if self._live is not None:
            self._live.close()
        return self.received
