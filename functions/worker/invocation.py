"""What every part of the worker shares within one invocation: its dependencies, the deadline after
which in-flight jobs are released, the hop of a blocking AWS request off the event loop, and the
clock as the job records keep it.

The worker's use case is split by concern (functions.worker.service is its spine); each part takes
this one object rather than copies of its fields, so that all of them see the same deadline and
the same clock, and run their AWS requests on the same pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from shared.clock import truncate_to_millis

if TYPE_CHECKING:
    from functions.worker.dependencies import WorkerDependencies
    from functions.worker.settings import WorkerSettings

T = TypeVar("T")


@dataclass(frozen=True)
class Invocation:
    """One invocation's worker: `deadline` is the time.monotonic() after which jobs are released."""

    deps: WorkerDependencies
    deadline: float

    @property
    def settings(self) -> WorkerSettings:
        return self.deps.settings

    async def io(self, function: Callable[..., T], *args: object) -> T:
        """Run a blocking AWS request on the worker's pool for them, off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.deps.executor, lambda: function(*args))

    def now(self) -> datetime:
        """The clock's time at the precision the job records store."""
        return truncate_to_millis(self.deps.clock.now())
