"""The composition root of the relay function."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import boto3

from functions.relay.settings import RelaySettings
from shared.adapters.sqs_queue import SqsJobQueue
from shared.ports import JobQueue


@dataclass(frozen=True)
class RelayDependencies:
    """The queue newly accepted jobs are dispatched to."""

    queue: JobQueue


@cache
def build_dependencies(settings: RelaySettings) -> RelayDependencies:
    """Create the SQS client once per container."""
    return RelayDependencies(queue=SqsJobQueue(boto3.client("sqs"), settings.jobs_queue_url))
