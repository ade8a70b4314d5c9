"""The asynchronous half wired together for tests: stream -> relay -> SQS -> worker, and the sweeper.

Every function runs through its real Lambda handler, in this process, against moto and the
local model server over real sockets; the event source mappings are outlast.local's emulation.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3

from functions.relay.handler import lambda_handler as relay_handler
from functions.status.handler import lambda_handler as status_handler
from functions.submit.handler import lambda_handler as submit_handler
from functions.sweeper.handler import lambda_handler as sweeper_handler
from functions.worker.handler import lambda_handler as worker_handler
from infra.config import DLQ_EXTRA_RECEIVES
from outlast.local.event_sources import FunctionError, SqsSource, StreamSource
from tests.support.aws import REGION, TestResources
from tests.support.events import job_event, submit_event
from tests.support.faults import WorkerCrash
from tests.support.lambda_context import FakeLambdaContext

Handler = Callable[[dict[str, Any], Any], Any]


def in_process(handler: Handler, timeout_seconds: float) -> Callable[[dict[str, Any]], Any]:
    """Invoke a handler like Lambda would: a fresh context, and an exception means the batch failed."""

    def invoke(event: dict[str, Any]) -> Any:
        try:
            return handler(event, FakeLambdaContext(timeout_seconds=timeout_seconds))
        except (Exception, WorkerCrash) as error:
            raise FunctionError(type(error).__name__) from error

    return invoke


@dataclass(frozen=True)
class Queues:
    """The jobs queue and its DLQ, the isolation queue and its DLQ, and the relay's on-failure queue."""

    jobs_url: str
    jobs_arn: str
    dlq_url: str
    relay_failures_url: str
    isolation_url: str
    isolation_arn: str
    isolation_dlq_url: str


def create_queues(endpoint: str, suffix: str, max_attempts: int, visibility_seconds: int) -> Queues:
    """Both job queues with the stack's redrive policy (maxReceiveCount = maxAttempts + 3) to their
    own DLQ."""
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION)

    def arn(url: str) -> str:
        return str(
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        )

    def with_dlq(name: str) -> tuple[str, str, str]:
        dlq_url = sqs.create_queue(QueueName=f"{name}-dlq-{suffix}")["QueueUrl"]
        url = sqs.create_queue(
            QueueName=f"{name}-{suffix}",
            Attributes={
                "VisibilityTimeout": str(visibility_seconds),
                "RedrivePolicy": json.dumps(
                    {
                        "deadLetterTargetArn": arn(dlq_url),
                        "maxReceiveCount": str(max_attempts + DLQ_EXTRA_RECEIVES),
                    }
                ),
            },
        )["QueueUrl"]
        return url, arn(url), dlq_url

    jobs_url, jobs_arn, dlq_url = with_dlq("jobs")
    isolation_url, isolation_arn, isolation_dlq_url = with_dlq("isolation")
    failures_url = sqs.create_queue(QueueName=f"relay-failures-{suffix}")["QueueUrl"]
    return Queues(
        jobs_url=jobs_url,
        jobs_arn=jobs_arn,
        dlq_url=dlq_url,
        relay_failures_url=failures_url,
        isolation_url=isolation_url,
        isolation_arn=isolation_arn,
        isolation_dlq_url=isolation_dlq_url,
    )


@dataclass
class Pipeline:
    """Submit through the API handlers, then pump the asynchronous half until a condition holds."""

    endpoint: str
    resources: TestResources
    queues: Queues
    model_url: str
    worker_timeout_seconds: float
    relay: StreamSource = field(init=False)
    worker: SqsSource = field(init=False)
    isolation: SqsSource = field(init=False)  # the worker's second trigger: one job per invocation
    # More consumers of the jobs stream that `pump` polls too (the notifier, in budget tests).
    streams: list[StreamSource] = field(default_factory=list)

    def __post_init__(self) -> None:
        dynamodb = boto3.client("dynamodb", endpoint_url=self.endpoint, region_name=REGION)
        stream_arn = dynamodb.describe_table(TableName=self.resources.jobs_table)["Table"]["LatestStreamArn"]
        sqs = boto3.client("sqs", endpoint_url=self.endpoint, region_name=REGION)
        self.sqs = sqs
        self.relay = StreamSource(
            streams=boto3.client("dynamodbstreams", endpoint_url=self.endpoint, region_name=REGION),
            stream_arn=stream_arn,
            invoke=in_process(relay_handler, 30),
            filters=[{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"type": {"S": ["job"]}}}}],
            on_failure=lambda info: sqs.send_message(
                QueueUrl=self.queues.relay_failures_url, MessageBody=json.dumps(info)
            ),
        )
        self.worker = SqsSource(
            sqs=sqs,
            queue_url=self.queues.jobs_url,
            queue_arn=self.queues.jobs_arn,
            invoke=in_process(worker_handler, self.worker_timeout_seconds),
            batch_size=10,
        )
        self.isolation = SqsSource(
            sqs=sqs,
            queue_url=self.queues.isolation_url,
            queue_arn=self.queues.isolation_arn,
            invoke=in_process(worker_handler, self.worker_timeout_seconds),
            batch_size=1,
        )

    # --- the HTTP half, through the handlers -------------------------------------------------

    def submit(self, body: dict[str, Any], key: str, **identity: Any) -> dict[str, Any]:
        """Submit and return the handler's response (status, headers, parsed body)."""
        return _parsed(submit_handler(submit_event(body, key=key, **identity), FakeLambdaContext()))

    def status(self, job_id: str, **identity: Any) -> dict[str, Any]:
        """The job's status document."""
        response = _parsed(status_handler(job_event("get_status", job_id, **identity), FakeLambdaContext()))
        document: dict[str, Any] = response["body"]
        return document

    def result(self, job_id: str, **identity: Any) -> dict[str, Any]:
        """The job's result response."""
        return _parsed(status_handler(job_event("get_result", job_id, **identity), FakeLambdaContext()))

    def cancel(self, job_id: str, **identity: Any) -> dict[str, Any]:
        """Cancel the job."""
        return _parsed(status_handler(job_event("cancel", job_id, **identity), FakeLambdaContext()))

    # --- the asynchronous half ------------------------------------------------------------------

    def stream_consumer(self, handler: Handler, filters: list[dict[str, Any]]) -> StreamSource:
        """Another consumer of the jobs stream (from its start), which `pump` polls from now on."""
        dynamodb = boto3.client("dynamodb", endpoint_url=self.endpoint, region_name=REGION)
        stream_arn = dynamodb.describe_table(TableName=self.resources.jobs_table)["Table"]["LatestStreamArn"]
        source = StreamSource(
            streams=boto3.client("dynamodbstreams", endpoint_url=self.endpoint, region_name=REGION),
            stream_arn=stream_arn,
            invoke=in_process(handler, 30),
            filters=filters,
        )
        self.streams.append(source)
        return source

    def sweep(self) -> dict[str, Any]:
        """Run the sweeper once."""
        result: dict[str, Any] = sweeper_handler({"source": "aws.scheduler"}, FakeLambdaContext())
        return result

    def pump(self, until: Callable[[], bool], timeout_seconds: float = 30.0, sweep: bool = False) -> None:
        """Relay and work (and sweep, if asked) until `until()` holds; fail after the timeout."""
        deadline = time.monotonic() + timeout_seconds
        while not until():
            if time.monotonic() > deadline:
                raise AssertionError("the pipeline did not reach the expected state in time")
            self.relay.poll()
            for stream in self.streams:
                stream.poll()
            self.worker.poll(idle_sleep=0)
            self.isolation.poll(idle_sleep=0)
            if sweep:
                self.sweep()
            time.sleep(0.05)

    def terminal(
        self, *job_ids: str, timeout_seconds: float = 30.0, sweep: bool = False
    ) -> list[dict[str, Any]]:
        """Pump until every job is terminal; their status documents."""
        terminal = {"Succeeded", "Failed", "Canceled"}
        self.pump(lambda: all(self.status(j)["status"] in terminal for j in job_ids), timeout_seconds, sweep)
        return [self.status(j) for j in job_ids]

    def model_calls(self) -> list[dict[str, Any]]:
        """Every call the model server answered (or refused) so far."""
        with urllib.request.urlopen(self.model_url.removesuffix("/v1") + "/_calls", timeout=10) as response:  # noqa: S310 - loopback
            calls: list[dict[str, Any]] = json.loads(response.read())
        return calls

    def queue_depth(self, url: str) -> int:
        """Visible + in-flight + delayed messages on a queue."""
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return (
            int(attributes["ApproximateNumberOfMessages"])
            + int(attributes["ApproximateNumberOfMessagesNotVisible"])
            + int(attributes["ApproximateNumberOfMessagesDelayed"])
        )

    # --- helpers for failure scenarios -------------------------------------------------------

    def wait_for(self, until: Callable[[], bool], timeout_seconds: float = 30.0) -> None:
        """Poll `until()` without pumping anything (another thread does the work); fail after the timeout."""
        deadline = time.monotonic() + timeout_seconds
        while not until():
            if time.monotonic() > deadline:
                raise AssertionError("the expected state was not reached in time")
            time.sleep(0.05)

    def terminal_with_history(
        self, *job_ids: str, timeout_seconds: float = 30.0, sweep: bool = False
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Pump until every job is terminal; their final documents and every document read on the way."""
        terminal = {"Succeeded", "Failed", "Canceled"}
        history: list[dict[str, Any]] = []

        def done() -> bool:
            documents = [self.status(j) for j in job_ids]
            history.extend(documents)
            return all(d["status"] in terminal for d in documents)

        self.pump(done, timeout_seconds, sweep)
        return [self.status(j) for j in job_ids], history

    def in_background(self, work: Callable[[], object]) -> Background:
        """Run `work` on a thread (a worker invocation, a pump) while the test acts on the job."""
        return Background(work).start()

    @contextlib.contextmanager
    def sweeper_in_background(self, every_seconds: float = 0.1) -> Iterator[list[dict[str, Any]]]:
        """Run the sweeper over and over on a thread, as its schedule would, while the block runs.

        Yields the list its reports are appended to.
        """
        stop = threading.Event()
        reports: list[dict[str, Any]] = []

        def sweeping() -> None:
            while not stop.is_set():
                reports.append(self.sweep())
                stop.wait(every_seconds)

        sweeper = self.in_background(sweeping)
        try:
            yield reports
        finally:
            stop.set()
            sweeper.join()

    def set_worker_timeout(self, seconds: float) -> None:
        """Invoke the worker with this function timeout from now on (the release deadline follows it)."""
        self.worker_timeout_seconds = seconds
        self.worker.invoke = in_process(worker_handler, seconds)
        self.isolation.invoke = in_process(worker_handler, seconds)

    def spy_worker(self) -> list[Invocation]:
        """Record every worker invocation from now on, from either queue: its event and its
        response (or failure)."""
        invocations: list[Invocation] = []

        def spy(invoke: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
            def spying(event: dict[str, Any]) -> Any:
                invocation = Invocation(event=event)
                invocations.append(invocation)
                invocation.response = invoke(event)
                return invocation.response

            return spying

        self.worker.invoke = spy(self.worker.invoke)
        self.isolation.invoke = spy(self.isolation.invoke)
        return invocations

    def set_jobs_visibility(self, seconds: int) -> None:
        """Change the jobs queue's visibility timeout (how long a crashed delivery stays hidden)."""
        self.sqs.set_queue_attributes(
            QueueUrl=self.queues.jobs_url, Attributes={"VisibilityTimeout": str(seconds)}
        )

    def send_raw(self, body: str) -> None:
        """Put a message body on the jobs queue, as a duplicate delivery or a stranger would."""
        self.sqs.send_message(QueueUrl=self.queues.jobs_url, MessageBody=body)

    def peek_bodies(self, url: str) -> list[str]:
        """The bodies of the visible messages on a queue, left visible (their receive count grows)."""
        response = self.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, WaitTimeSeconds=0
        )
        return [m["Body"] for m in response.get("Messages", [])]

    def drain(self, url: str) -> list[dict[str, Any]]:
        """Receive and delete every visible message of a queue, with attributes."""
        drained: list[dict[str, Any]] = []
        while True:
            response = self.sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=0,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            messages = response.get("Messages", [])
            if not messages:
                return drained
            drained.extend(dict(m) for m in messages)
            self.sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
            )


@dataclass
class Invocation:
    """One recorded worker invocation."""

    event: dict[str, Any]
    response: Any = None

    @property
    def bodies(self) -> list[str]:
        """The message bodies of the batch."""
        return [record["body"] for record in self.event["Records"]]

    @property
    def failures(self) -> list[str]:
        """The message ids the worker asked to see again (ReportBatchItemFailures)."""
        return [str(f["itemIdentifier"]) for f in (self.response or {}).get("batchItemFailures", [])]


class Background:
    """A thread whose exception, if any, is raised again by `join`."""

    def __init__(self, work: Callable[[], object]) -> None:
        self._work = work
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="pipeline-background", daemon=True)

    def _run(self) -> None:
        try:
            self._work()
        except BaseException as error:  # noqa: BLE001 - handed to the test thread by join()
            self._error = error

    def start(self) -> Background:
        """Start the thread."""
        self._thread.start()
        return self

    def join(self, timeout_seconds: float = 60.0) -> None:
        """Wait for the work; re-raise what it raised."""
        self._thread.join(timeout_seconds)
        if self._thread.is_alive():
            raise AssertionError("background work did not finish in time")
        if self._error is not None:
            raise self._error


def _parsed(response: dict[str, Any]) -> dict[str, Any]:
    body = response.get("body")
    return {**response, "body": json.loads(body) if body else None}
