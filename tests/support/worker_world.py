"""The worker wired to in-memory ports, for the worker's unit tests: a world of fakes with one job
at a time, the lanes' queues recorded, and what a hand-back must look like."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from functions.worker.dependencies import WorkerDependencies
from functions.worker.service import JobWorker
from functions.worker.settings import WorkerSettings
from shared import resources as r
from shared.adapters.json_schema import JsonSchemaValidator
from shared.adapters.sqs_queue import encode_message
from shared.batches import BatchCall
from shared.job import JobInput, JobRecord, Usage
from shared.lifecycle import JobStatus
from shared.ports import Completion, CompletionRequest, JobMessage, Lane, Transition
from tests.fakes import FakeClock, InMemoryJobRepository, InMemoryPayloadStore, InMemoryStepStore, job_record
from tests.output_fakes import InMemoryOutputEventStore
from tests.slot_fakes import InMemorySlotStore

USAGE = Usage(input_tokens=40, output_tokens=7)
TRACE = "trace-1"


class RecordingQueue:
    """One lane's queue: messages sent (with their delays) and parked, in memory."""

    def __init__(self) -> None:
        self.sent: list[tuple[JobMessage, int]] = []
        self.parked: list[tuple[str, str | None]] = []

    def send(self, message: JobMessage, delay_seconds: int = 0) -> None:
        # As SqsJobQueue: every job message goes out in its tenant's group.
        assert message.group, "a job message is sent with its tenant's MessageGroupId"
        self.sent.append((message, delay_seconds))

    def send_batch(self, messages: list[JobMessage]) -> list[JobMessage]:
        raise AssertionError("the worker never sends batches")

    def send_to_dlq(self, body: str, reason: str, job_id: str | None) -> None:
        self.parked.append((reason, job_id))


class RecordingBatcher:
    """The batcher's queue: the calls handed to it, in memory."""

    def __init__(self) -> None:
        self.calls: list[BatchCall] = []

    def send(self, calls: list[BatchCall]) -> None:
        self.calls.extend(calls)


class CountingProvider:
    """A model that answers at once (or when released), counting its calls."""

    def __init__(self, text: str = "The summary.", gate: threading.Event | None = None) -> None:
        self.text = text
        self.gate = gate
        self.calls: list[CompletionRequest] = []

    def complete(self, request: CompletionRequest) -> Completion:
        self.calls.append(request)
        if self.gate is not None:
            self.gate.wait(timeout=10)
        return Completion(text=self.text, usage=USAGE)


class World:
    """A worker wired to fakes, with one Pending job and its input."""

    def __init__(
        self,
        repository: InMemoryJobRepository | None = None,
        payloads: InMemoryPayloadStore | None = None,
        provider: Any = None,
        **settings: str,
    ) -> None:
        self.clock = FakeClock()
        self.repository = repository or InMemoryJobRepository()
        self.payloads = payloads or InMemoryPayloadStore()
        self.steps = InMemoryStepStore()
        self.events = InMemoryOutputEventStore()
        self.provider = provider or CountingProvider()
        self.queues = {Lane.SHARED: RecordingQueue(), Lane.ISOLATION: RecordingQueue()}
        self.slots = InMemorySlotStore()
        self.batcher = RecordingBatcher()
        self.settings = WorkerSettings.model_validate(
            {
                r.ENV_JOBS_TABLE: "jobs",
                r.ENV_PAYLOAD_BUCKET: "payloads",
                r.ENV_JOBS_QUEUE_URL: "https://jobs",
                r.ENV_DLQ_URL: "https://dlq",
                r.ENV_ISOLATION_QUEUE_URL: "https://isolation",
                r.ENV_ISOLATION_QUEUE_ARN: "arn:aws:sqs:us-east-1:123456789012:isolation",
                r.ENV_ISOLATION_DLQ_URL: "https://isolation-dlq",
                r.ENV_OPENAI_SECRET: "secret",
                r.ENV_OUTPUT_EVENTS_TABLE: "output-events",
                r.ENV_SLOTS_TABLE: "slots",
                "HEARTBEAT_SECONDS": "0.05",
                **settings,
            }
        )
        self.executors = [ThreadPoolExecutor(4), ThreadPoolExecutor(4)]

    def deps(self) -> WorkerDependencies:
        return WorkerDependencies(
            settings=self.settings,
            repository=self.repository,
            slots=self.slots,
            payloads=self.payloads,
            steps=self.steps,
            events=self.events,
            queues=self.queues,
            clock=self.clock,
            provider=self.build_provider,
            validator=JsonSchemaValidator(),
            executor=self.executors[0],
            model_executor=self.executors[1],
            random=lambda: 0.5,
            batch_calls=self.batcher,
        )

    def build_provider(self) -> Any:
        return self.provider

    def job(self, **overrides: Any) -> JobRecord:
        job = job_record(self.clock.now(), **overrides)
        self.repository.create_job(job, job.dispatch_at + timedelta(minutes=15))
        self.payloads.put_input(JobInput(job_id=job.job_id, text="The text."), "item", job.expires_at)
        return job

    def deliver(self, job: JobRecord, lane: Lane = Lane.SHARED, *, solo: bool = False) -> None:
        """One message of the job through the worker; RetryLater propagates (the message stays)."""
        worker = JobWorker(self.deps(), time.monotonic() + 60, solo=solo)
        body = encode_message(JobMessage(job_id=job.job_id, trace_id=TRACE))
        asyncio.run(worker.handle(body, lane))

    def current(self, job: JobRecord) -> JobRecord:
        stored = self.repository.get_job(job.job_id)
        assert stored is not None
        return stored

    def close(self) -> None:
        for executor in self.executors:
            executor.shutdown(wait=False, cancel_futures=True)


def handed_back(world: World, job: JobRecord) -> JobRecord:
    """The job after the worker handed it back: Pending, due later, and a fresh message of it
    (same job, same trace, its tenant's group) sent to its lane's queue, delayed until then."""
    current = world.current(job)
    assert current.status is JobStatus.PENDING
    assert current.dispatch_at > world.clock.now()
    [(message, delay)] = world.queues[Lane.of(current)].sent
    assert message == JobMessage(job_id=job.job_id, trace_id=TRACE, group=job.tenant)
    assert delay == (current.dispatch_at - world.clock.now()).total_seconds()
    world.queues[Lane.of(current)].sent.clear()
    return current


def redrive(world: World, job: JobRecord) -> None:
    """What an operator's redrive writes: Failed -> Pending, a new run with its attempts renewed."""
    world.repository.transition(
        Transition(
            job_id=job.job_id,
            source=JobStatus.FAILED,
            target=JobStatus.PENDING,
            now=world.clock.now(),
            renew_attempts=True,
            operator_redrive=True,
            dispatch_at=world.clock.now(),
        )
    )
