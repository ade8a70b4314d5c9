"""The model provider, emulated: the local model server the functions' OpenAI client calls.

No construct holds the provider (the worker's settings in infra/constructs/worker.py name it);
locally every function's OPENAI_BASE_URL points at this server (outlast.local.model_server), the
batcher's and the poller's too: its Batch API completes a batch a few seconds after its creation
(`outlast local up --batch-seconds` sets how many).
"""

from __future__ import annotations

from outlast.local.capabilities.base import Starter
from outlast.local.model_server import ModelServer


class ModelProvider(Starter):
    """The local model server, on a free port."""

    def __init__(self, batch_seconds: float | None = None) -> None:
        self.server: ModelServer | None = None
        self._batch_seconds = batch_seconds

    def start(self) -> ModelProvider:
        server = (
            ModelServer() if self._batch_seconds is None else ModelServer(batch_seconds=self._batch_seconds)
        )
        self.server = server.start()
        return self

    @property
    def url(self) -> str:
        """What OPENAI_BASE_URL takes (after start)."""
        if self.server is None:
            raise RuntimeError("the model server is not started")
        return self.server.url

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
