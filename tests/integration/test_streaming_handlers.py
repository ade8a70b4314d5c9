"""The streaming output's handlers on moto, driven by the samples in events/: GET .../output, the
follow route (its replay through the local @connections API), and the output pusher."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from functions.output_pusher.handler import lambda_handler as pusher_handler
from functions.ws_connections.handler import lambda_handler as connections_handler
from functions.ws_follow.handler import lambda_handler as follow_handler
from shared import resources as r
from shared.adapters.dynamodb_output import DynamoOutputEventStore
from shared.contract import Operation
from shared.lifecycle import JobStatus
from shared.output import OutputEvent
from shared.ports import Transition
from tests.support import jobs
from tests.support.answers import (
    QUIET_METRICS,
    SUMMARIZE,
    accepted,
    assert_problem,
    call_status,
    call_submit,
    new_key,
)
from tests.support.aws import REGION, create_connections_table
from tests.support.events import job_event, load_event, output_event_record, submit_event
from tests.support.lambda_context import FakeLambdaContext
from tests.support.management_api import RecordingManagementApi
from tests.support.storage import Storage

if TYPE_CHECKING:
    from tests.support.aws import TestResources

pytestmark = [pytest.mark.integration, QUIET_METRICS]


class Socket:
    """What one open connection received through the @connections API."""

    def __init__(self, api: RecordingManagementApi, connection_id: str) -> None:
        api.connect(connection_id)
        self.frames = api.received[connection_id]

    def outputs(self) -> list[dict[str, Any]]:
        return [json.loads(frame) for frame in self.frames if json.loads(frame).get("type") == "output"]


@pytest.fixture
def registry(resources: TestResources, monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingManagementApi]:
    assert resources
    api = RecordingManagementApi().start()
    monkeypatch.setenv(r.ENV_CONNECTIONS_TABLE, create_connections_table(os.environ["AWS_ENDPOINT_URL"]))
    monkeypatch.setenv(r.ENV_CONNECTIONS_ENDPOINT, api.url)
    yield api
    api.stop()


def _events(resources: TestResources) -> DynamoOutputEventStore:
    client = boto3.client("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=REGION)
    return DynamoOutputEventStore(client, resources.output_events_table)


def _streaming_job() -> str:
    body = {**SUMMARIZE, "options": {"stream": True}}
    return accepted(call_submit(submit_event(body, key=new_key())))


def _write(resources: TestResources, job_id: str, attempt: int, *texts: str) -> None:
    store = _events(resources)
    for seq, text in enumerate(texts, start=1):
        store.put_event(
            OutputEvent(job_id=job_id, attempt=attempt, seq=seq, text=text),
            jobs.now_millis() + timedelta(hours=24),
        )


def _follow(
    job_id: str, connection_id: str, after: dict[str, int] | None = None, **context: Any
) -> dict[str, Any]:
    event = copy.deepcopy(load_event("ws_follow"))
    event["requestContext"]["connectionId"] = connection_id
    event["requestContext"]["authorizer"].update(context)
    message: dict[str, Any] = {"action": "follow", "jobId": job_id}
    if after is not None:
        message["after"] = after
    event["body"] = json.dumps(message)
    answer = follow_handler(event, FakeLambdaContext())
    assert answer["statusCode"] == 200
    frame: dict[str, Any] = json.loads(answer["body"])
    return frame


def _connect(connection_id: str) -> None:
    event = copy.deepcopy(load_event("ws_connect"))
    event["requestContext"]["connectionId"] = connection_id
    assert connections_handler(event, FakeLambdaContext())["statusCode"] == 200


def test_a_streaming_job_says_so_and_its_output_reads_in_pages(resources: TestResources) -> None:
    # Given a streaming job with three events of attempt 1
    job_id = _streaming_job()
    _write(resources, job_id, 1, "Once", " upon", " a time")

    # When its owner reads two events, then the rest
    status = call_status(job_event("get_status", job_id))
    first = call_status(job_event("get_output", job_id, query={"limit": "2"}))
    rest = call_status(job_event("get_output", job_id, query={"after": first.body["nextCursor"]}))

    # Then
    assert status.body["stream"] is True
    assert first.status == 200
    assert [e["text"] for e in first.body["events"]] == ["Once", " upon"]
    assert first.body == {**first.body, "nextCursor": "1.2", "complete": False, "resultAttempt": None}
    assert [(e["attempt"], e["seq"], e["text"]) for e in rest.body["events"]] == [(1, 3, " a time")]
    assert rest.body["events"][0]["jobId"] == job_id


def test_an_ended_job_s_output_is_complete_with_its_result_attempt(resources: TestResources) -> None:
    job_id = _streaming_job()
    _write(resources, job_id, 1, "The", " end.")
    storage = Storage(resources)
    running = jobs.claim(storage.repository(), job_id)
    storage.repository().transition(
        Transition(
            job_id=job_id,
            source=JobStatus.RUNNING,
            target=JobStatus.SUCCEEDED,
            now=jobs.now_millis(),
            lease_token=running.lease_token,
            result_location="job",
            result_body=json.dumps({"output": "The end.", "output_attempt": 1}),
            result_attempt=1,
        )
    )

    page = call_status(job_event("get_output", job_id))

    assert page.body["complete"] is True
    assert page.body["nextCursor"] is None
    assert page.body["resultAttempt"] == 1
    assert call_status(job_event("get_result", job_id)).body["output"] == "The end."


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"after": "1"}, "invalid_cursor"),
        ({"after": "a.b"}, "invalid_cursor"),
        ({"limit": "0"}, "invalid_limit"),
    ],
)
def test_a_bad_cursor_or_limit_is_a_400(resources: TestResources, query: dict[str, str], code: str) -> None:
    job_id = _streaming_job()

    assert_problem(call_status(job_event("get_output", job_id, query=query)), 400, code)


def test_someone_elses_output_is_a_404(resources: TestResources) -> None:
    job_id = _streaming_job()
    _write(resources, job_id, 1, "secret")

    answer = call_status(job_event("get_output", job_id, sub="another-user"))

    body = assert_problem(answer, 404, "job_not_found")
    assert "secret" not in json.dumps(body)


def test_classify_may_not_stream(resources: TestResources) -> None:
    body = {
        "operation": Operation.CLASSIFY.value,
        "input": {"text": "x"},
        "options": {"labels": ["a"], "stream": True},
    }

    problem = assert_problem(call_submit(submit_event(body, key=new_key())), 400, "invalid_request")

    assert {"name": "body", "reason": "stream_not_supported"} in problem["invalidParams"]


def test_a_follow_replays_through_the_management_api_and_the_pusher_sends_what_follows(
    resources: TestResources, registry: RecordingManagementApi
) -> None:
    # Given the owner's streaming job with two events, and two connections of the owner: one follows
    job_id = _streaming_job()
    _write(resources, job_id, 1, "Once", " upon")
    follower, bystander = Socket(registry, "conn-follow"), Socket(registry, "conn-other")
    _connect("conn-follow")
    _connect("conn-other")

    # When one follows from the start
    frame = _follow(job_id, "conn-follow", connectedAt=1795957200000)

    # Then the replay came through @connections, before the answer
    assert frame == {"type": "following", "jobId": job_id}
    assert [(o["seq"], o["text"]) for o in follower.outputs()] == [(1, "Once"), (2, " upon")]

    # And a new event's stream record reaches the follower only, through the pusher
    event = OutputEvent(job_id=job_id, attempt=1, seq=3, text=" a time")
    record = output_event_record(event, 7)
    answer = pusher_handler({"Records": [record]}, FakeLambdaContext())
    assert answer == {"batchItemFailures": []}
    assert [o["seq"] for o in follower.outputs()] == [1, 2, 3]
    assert bystander.frames == []


def test_another_owners_follow_gets_the_error_and_nothing_else(
    resources: TestResources, registry: RecordingManagementApi
) -> None:
    job_id = _streaming_job()
    _write(resources, job_id, 1, "secret")
    intruder = Socket(registry, "conn-bob")

    frame = _follow(job_id, "conn-bob", tenant="globex", sub="bob", principalId="bob")

    assert frame == {"type": "error", "code": "job_not_found", "message": "No such job."}
    assert intruder.frames == []


def test_disconnect_forgets_the_follows(resources: TestResources, registry: RecordingManagementApi) -> None:
    job_id = _streaming_job()
    socket = Socket(registry, "conn-follow")
    _connect("conn-follow")
    assert _follow(job_id, "conn-follow")["type"] == "following"

    event = copy.deepcopy(load_event("ws_disconnect"))
    event["requestContext"]["connectionId"] = "conn-follow"
    connections_handler(event, FakeLambdaContext())
    record = output_event_record(OutputEvent(job_id=job_id, attempt=1, seq=1, text="late"), 9)
    pusher_handler({"Records": [record]}, FakeLambdaContext())

    assert socket.frames == []
