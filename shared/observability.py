"""Logger, Tracer and Metrics for every function, configured by Powertools' environment variables.

Correlation id: the API Gateway request id at the edge of a request, then the job id wherever
a job is known (`bind_job`, which keeps the request id as `request_id`), so one job's story
reads as one thread across functions and a caller's correlationId still finds its request.

Tracing (cold start, docs/architecture.md): a traced function patches botocore only, not every
library aws-xray-sdk supports that happens to be installed; a function whose tracing is off
(`POWERTOOLS_TRACE_DISABLED`, as the API functions are deployed unless `apiTracing`, and every
function in local mode) gets a tracer on a provider that records nothing, so aws-xray-sdk's
recorder is never imported. Like Powertools' own constructors, this reads Powertools' variables
when the module is imported.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

# What the Lambda context would add to every line though CloudWatch already names it once per
# log group: the function's name, ARN and memory. Every byte of every line is billed (DESIGN.md,
# "Cost discipline"); the request id, cold start and trace id stay.
CONSTANT_CONTEXT_KEYS = frozenset({"function_name", "function_arn", "function_memory_size"})


class _LeanFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON formatter without the keys that are the same on every line of a function."""

    def append_keys(self, **additional_keys: Any) -> None:
        super().append_keys(**{k: v for k, v in additional_keys.items() if k not in CONSTANT_CONTEXT_KEYS})


# The only library whose calls a trace follows: the AWS SDK's (the model calls go through httpx2,
# which aws-xray-sdk does not patch either way).
TRACED_MODULES = ("botocore",)
_TRUTHY = frozenset({"1", "y", "yes", "t", "true", "on"})  # Powertools' reading of a boolean variable


class _NoSegment(BaseSegment):
    """A segment that keeps nothing."""

    def close(self, end_time: int | None = None) -> None:
        """Nothing to close."""

    def add_subsegment(self, subsegment: Any) -> None:
        """Nothing is kept."""

    def remove_subsegment(self, subsegment: Any) -> None:
        """Nothing is kept."""

    def put_annotation(self, key: str, value: Any) -> None:
        """Nothing is kept."""

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        """Nothing is kept."""

    def add_exception(self, exception: BaseException, stack: Any, remote: bool = False) -> None:
        """Nothing is kept."""


class NoTracing(BaseProvider):
    """The tracer's provider while tracing is off: what the disabled X-Ray recorder would do
    (nothing), without importing it and its patching machinery at cold start."""

    @contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Iterator[BaseSegment]:
        """A segment that records nothing."""
        yield _NoSegment()

    @asynccontextmanager
    async def in_subsegment_async(self, name: str | None = None, **kwargs: Any) -> AsyncIterator[BaseSegment]:
        """A segment that records nothing."""
        yield _NoSegment()

    def put_annotation(self, key: str, value: Any) -> None:
        """Nothing is kept."""

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        """Nothing is kept."""

    def patch(self, modules: Sequence[str]) -> None:
        """Nothing is patched."""

    def patch_all(self) -> None:
        """Nothing is patched."""


def tracing_disabled() -> bool:
    """Whether POWERTOOLS_TRACE_DISABLED turns tracing off, read as Powertools reads it."""
    return os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() in _TRUTHY


def build_tracer() -> Tracer:
    """Powertools' tracer: botocore patched when tracing is on, nothing imported when it is off."""
    if tracing_disabled():
        return Tracer(disabled=True, auto_patch=False, provider=NoTracing())
    return Tracer(patch_modules=TRACED_MODULES)


logger = Logger(logger_formatter=_LeanFormatter())
tracer = build_tracer()
metrics = Metrics()


def bind_job(job_id: str) -> None:
    """Make the job id the correlation id of every log line that follows (one job per invocation).

    The request id it replaces stays on those lines as `request_id`: it is the `correlationId`
    a problem+json answer gives the caller, and an on-call engineer searches the logs for it.
    """
    request_id = logger.get_correlation_id()
    if request_id and request_id != job_id:
        logger.append_keys(request_id=request_id)
    logger.set_correlation_id(job_id)
    logger.append_keys(job_id=job_id)


def bind_job_in_task(job_id: str, trace_id: str) -> None:
    """Like bind_job, for one of many jobs running concurrently in an invocation.

    The keys live in a context variable, so each asyncio task (one per SQS record) logs its own
    job id, and they vanish with the task instead of leaking into the next record's lines.
    """
    logger.thread_safe_append_keys(correlation_id=job_id, job_id=job_id, trace_id=trace_id)


def current_trace_id() -> str:
    """The X-Ray trace id of this invocation (a fresh id when tracing is off), for queue messages."""
    header = os.environ.get("_X_AMZN_TRACE_ID", "")
    for part in header.split(";"):
        if part.startswith("Root="):
            return part.removeprefix("Root=")
    return uuid.uuid4().hex
