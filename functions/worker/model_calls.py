"""A model call made under the claim's lease: called on a model thread or streamed into output
events, watched (heartbeats, the invocation's deadline), and its answer checked against its schema.

Apart from the spine (functions.worker.service), which decides what to ask and what the answer
or the failure means for the job; this module only makes the call and stops a streaming one. Two
thread pools: model calls never queue the heartbeats that keep their own leases alive.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

from functions.worker.claimed_run import ClaimedRun
from functions.worker.invocation import Invocation
from functions.worker.lease_keeping import LeaseKeeper
from functions.worker.streaming import StreamingCall
from functions.worker.structured import checked, checked_answer
from functions.worker.tier_paths import TierPaths
from shared.job import Usage
from shared.ports import Completion, CompletionRequest, ModelProvider
from shared.retention import input_expiry


class ModelCalls:
    """One invocation's model calls; a stop from the watch (a cancel, the deadline, a lost lease) is
    the caller's to act on."""

    def __init__(self, invocation: Invocation, lease: LeaseKeeper, tiers: TierPaths) -> None:
        self._at = invocation
        self._lease = lease
        self._tiers = tiers

    async def call(self, run: ClaimedRun, request: CompletionRequest) -> Completion:
        """The model call, with heartbeats every few seconds and a watch on the invocation's deadline."""
        # Built off the event loop: the first build reads the secret and creates a client, which
        # would otherwise stall every other job's heartbeats in this batch.
        provider = await self._at.io(self._at.deps.provider)
        self._tiers.check_time_for(request)
        if time.monotonic() - run.last_heartbeat >= self._at.settings.heartbeat_seconds:
            # Slow to get here (a cold start): look for a cancel before spending a model call.
            await self._lease.heartbeat(run)
        return await self._lease.watch(run, self.start_call(provider, request))

    def start_call(self, provider: ModelProvider, request: CompletionRequest) -> asyncio.Future[Completion]:
        """One call on a model thread, its answer checked against its schema there."""
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(
            self._at.deps.model_executor, checked_answer, provider, self._at.deps.validator, request
        )

    async def stream(self, run: ClaimedRun, request: CompletionRequest) -> Completion:
        """The streaming call, watched like any call (heartbeats, the deadline); a stop from the
        watch (a cancel, the deadline, a lost lease) is the caller's to act on (`stop_stream`)."""
        provider = await self._at.io(self._at.deps.provider)
        self._tiers.check_time_for(request)
        return await self._lease.watch(run, self.start_stream(run, provider, request))

    def start_stream(
        self, run: ClaimedRun, provider: ModelProvider, request: CompletionRequest
    ) -> asyncio.Future[Completion]:
        """The next output attempt, streamed into its events (a task: functions.worker.streaming)."""
        return asyncio.ensure_future(self._stream_call(run, provider, request))

    async def checked(self, request: CompletionRequest, call: Awaitable[Completion]) -> Completion:
        """A streamed answer, checked against its schema on a model thread once it is complete (the
        text streamed as generated; what is kept is that text, once it proved valid)."""
        completion = await call
        if request.response_schema is None:
            return completion
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._at.deps.model_executor, checked, completion, request, self._at.deps.validator
        )

    async def stop_stream(self, run: ClaimedRun, *, lost: bool = False) -> Usage | None:
        """Stop the claim's streaming call, if one is still running, and return what it cost (the
        text it streamed stays readable unless the job was lost)."""
        streaming, run.streaming = run.streaming, None
        if streaming is None or streaming.ended:
            return None
        return await streaming.stop(lost=lost, wait_seconds=self._at.settings.heartbeat_seconds)

    async def _stream_call(
        self, run: ClaimedRun, provider: ModelProvider, request: CompletionRequest
    ) -> Completion:
        # The attempt is taken by a heartbeat write before any event of it can exist.
        await self._lease.heartbeat(run, self._at.deps.repository.take_output_attempt)
        expires_at = input_expiry(self._at.now(), self._at.settings.input_retention_hours)
        run.streaming = StreamingCall(
            self._at.deps, run.job.job_id, run.job.output_attempt, request, expires_at
        )
        return await run.streaming.run(provider)
