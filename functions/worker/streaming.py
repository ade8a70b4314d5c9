"""One output attempt of a streaming job (DESIGN.md, "Streaming output"): the final call streamed
into events on a model thread, and stopped when the worker must stop spending.

The worker takes the attempt first (a heartbeat that adds 1 to the job's `outputAttempt`), then
runs a `StreamingCall` as a task: the provider hands each piece of text to the attempt's
OutputWriter as it arrives; when the call ends, what is buffered is written and the completion
names its attempt. A stop (a cancel, the deadline, a lost lease, a generic failure) comes from the
worker's watch through `stop`: the call's thread closes the stream at its next piece (so the
provider stops generating), the text received is written unless the job was lost, and what the
call cost is returned, by estimate when the provider did not say.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import datetime

from functions.worker.dependencies import WorkerDependencies
from functions.worker.flush import FlushPolicy
from functions.worker.output import OutputWriter
from functions.worker.signals import OutputWriteFailed
from shared.errors import TerminalProviderError, TransientProviderError
from shared.job import Usage
from shared.observability import logger, metrics
from shared.planner import estimate_call_usage
from shared.ports import Completion, CompletionRequest, ModelProvider, StreamControl, StreamStopped


class StreamingCall:
    """One streaming call of one output attempt, from its start to its end or its stop."""

    def __init__(
        self,
        deps: WorkerDependencies,
        job_id: str,
        attempt: int,
        request: CompletionRequest,
        expires_at: datetime,
    ) -> None:
        settings = deps.settings
        self._deps = deps
        self._request = request
        self._control = StreamControl()
        self._writer = OutputWriter(
            deps.events,
            job_id,
            attempt,
            FlushPolicy(settings.stream_flush_bytes, settings.stream_flush_ms),
            expires_at=expires_at,
            monotonic=time.monotonic,
            control=self._control,
        )
        self._task: asyncio.Future[Completion] | None = None
        self.ended = False  # the call returned or failed on its own: nothing left to stop

    async def run(self, provider: ModelProvider) -> Completion:
        """Stream the call into events; the completion names its attempt. A stop the worker asked
        for raises StreamStopped (`stop` finishes the events); an event that could not be written
        raises OutputWriteFailed with what the call cost."""
        self._task = asyncio.current_task()
        writer = self._writer
        loop = asyncio.get_running_loop()
        try:
            completion = await loop.run_in_executor(
                self._deps.model_executor, provider.stream, self._request, writer.write, self._control
            )
        except StreamStopped as stopped:
            if writer.failure is None:
                raise
            self.ended = True
            raise OutputWriteFailed(stopped.usage) from writer.failure
        except (TransientProviderError, TerminalProviderError):
            await self._io_finish()  # what it streamed stays readable; then the failure counts
            self.ended = True
            raise
        await self._io_finish()
        self.ended = True
        if writer.failure is not None:
            # The answer is whole but its last event is not written: this attempt is no result.
            raise OutputWriteFailed(completion.usage) from writer.failure
        metrics.add_metric(name="OutputEvents", unit="Count", value=writer.events_written)
        return replace(completion, output_attempt=writer.attempt)

    async def stop(self, *, lost: bool, wait_seconds: float) -> Usage | None:
        """Stop the call and return what it cost (None when the job was lost: its holder writes
        nothing more, usage included). Waits for the call's thread at most `wait_seconds`."""
        self._control.stop()
        if lost:
            self._writer.close()
        usage: Usage | None = None
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=wait_seconds)
            if done:
                usage = _cost_of(self._task)
            else:
                self._task.add_done_callback(_cost_of)  # its outcome is read when it comes
        if lost:
            return None
        try:
            await self._io_finish()
        except Exception:  # noqa: BLE001 - the events are a view: a flush that fails loses only its text
            logger.warning("the stopped call's last output could not be written")
        return usage or estimate_call_usage(self._request.messages, self._writer.received)

    async def _io_finish(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._deps.executor, self._writer.finish)


def _cost_of(task: asyncio.Future[Completion]) -> Usage | None:
    """What a stopped call's task says it cost (reading its outcome, so no error is left unread):
    the usage of StreamStopped, of a provider failure, or of an answer that won the race."""
    if task.cancelled():
        return None
    error = task.exception()
    if error is None:
        return task.result().usage
    usage = getattr(error, "usage", None)
    return usage if isinstance(usage, Usage) else None
