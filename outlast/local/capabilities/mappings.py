"""Event source mappings, emulated: stream and queue pollers that invoke their functions.

Emulates the AWS::Lambda::EventSourceMapping resources the constructs make: outbox.py's relay
and realtime.py's notifier on the jobs table's stream (filters, bisect-free retries, the
on-failure queue), worker.py's two queues, webhooks.py's queue and batch.py's batcher queue (batching
window, maximum concurrency, partial batch responses). outlast.local.event_sources holds the pollers; this
starter reads each mapping from the template and runs its poller as the function's role, as
Lambda's poller acts for the function in AWS.
"""

from __future__ import annotations

import json
from typing import Any

from outlast.local import event_sources
from outlast.local.capabilities.base import Log, Loops
from outlast.local.capabilities.functions import LOCAL_CONCURRENCY, Functions
from outlast.local.event_sources import SqsSource, StreamSource
from outlast.local.provision import LocalResources
from outlast.local.template import Resolver, Resource, Template


class Mappings(Loops):
    """One polling loop per stream mapping, up to the local concurrency per queue mapping."""

    def __init__(self, log: Log) -> None:
        super().__init__()
        self._log = log

    def start(
        self,
        template: Template,
        resolver: Resolver,
        *,
        functions: Functions,
        resources: LocalResources,
        endpoint: str,
    ) -> Mappings:
        """Start a poller for every mapping in the template."""
        wiring = _Wiring(resolver, functions, resources, endpoint)
        for resource in template.resources("AWS::Lambda::EventSourceMapping"):
            properties = resolver.resolve(resource.properties)
            function_arn = functions.function_arn(str(properties["FunctionName"]))
            source_arn = str(properties["EventSourceArn"])
            filters = [
                json.loads(f["Pattern"]) for f in properties.get("FilterCriteria", {}).get("Filters", [])
            ]
            item_failures = "ReportBatchItemFailures" in properties.get("FunctionResponseTypes", [])
            if ":dynamodb:" in source_arn:
                source = wiring.stream(properties, function_arn, filters, item_failures)
                self.run(resource.logical_id, source.poll, 0.2, self._log)
            elif ":sqs:" in source_arn:
                self._start_queue(resource, properties, wiring.queue(properties, function_arn, item_failures))
        return self

    def _start_queue(self, resource: Resource, properties: dict[str, Any], source: SqsSource) -> None:
        concurrency = int(properties.get("ScalingConfig", {}).get("MaximumConcurrency", LOCAL_CONCURRENCY))
        for index in range(min(concurrency, LOCAL_CONCURRENCY)):
            self.run(f"{resource.logical_id}-{index}", source.poll, 0.0, self._log)


class _Wiring:
    """A mapping's poller, acting as its function (its role's clients) on the local resources."""

    def __init__(
        self, resolver: Resolver, functions: Functions, resources: LocalResources, endpoint: str
    ) -> None:
        self.resolver = resolver
        self.functions = functions
        self.resources = resources
        self.endpoint = endpoint

    def _queue_url(self, arn: str) -> str:
        for logical_id, url in self.resources.queues.items():
            if self.resolver.attributes[(logical_id, "Arn")] == arn:
                return url
        raise KeyError(arn)

    def stream(
        self,
        properties: dict[str, Any],
        function_arn: str,
        filters: list[dict[str, Any]],
        item_failures: bool,
    ) -> StreamSource:
        destination = properties.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        # The mapping reads the stream and sends to its destination as the function, as in AWS.
        function = self.functions.logical_id(function_arn)
        iam = self.functions.iam
        sqs = iam.client(function, "sqs", self.endpoint)
        on_failure = None
        if destination:
            url = self._queue_url(str(destination))

            def on_failure(info: dict[str, Any]) -> None:
                sqs.send_message(QueueUrl=url, MessageBody=event_sources.dump(info))

        return StreamSource(
            streams=iam.client(function, "dynamodbstreams", self.endpoint),
            stream_arn=str(properties["EventSourceArn"]),
            invoke=self.functions.invoker(function_arn),
            batch_size=int(properties.get("BatchSize", 100)),
            filters=filters,
            max_retries=int(properties.get("MaximumRetryAttempts", 3)),
            on_failure=on_failure,
            report_item_failures=item_failures,
        )

    def queue(self, properties: dict[str, Any], function_arn: str, item_failures: bool) -> SqsSource:
        return SqsSource(
            # The mapping receives and deletes as the function, as in AWS.
            sqs=self.functions.iam.client(self.functions.logical_id(function_arn), "sqs", self.endpoint),
            queue_url=self._queue_url(str(properties["EventSourceArn"])),
            queue_arn=str(properties["EventSourceArn"]),
            invoke=self.functions.invoker(function_arn),
            batch_size=int(properties.get("BatchSize", 10)),
            batching_window_seconds=float(properties.get("MaximumBatchingWindowInSeconds", 0)),
            report_item_failures=item_failures,
        )
