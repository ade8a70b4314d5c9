"""The streaming output's functions on fakes: the follow and unfollow routes, and the output pusher."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from functions.output_pusher.dependencies import OutputPusherDependencies
from functions.output_pusher.service import BatchPusher
from functions.ws_follow.dependencies import FollowDependencies
from functions.ws_follow.service import handle
from shared.errors import StorageUnavailableError
from shared.job import Caller, JobRecord
from shared.lifecycle import JobStatus
from shared.output import OutputEvent
from shared.output_ports import Follow
from shared.realtime import CONNECT_GRACE, Connection, RouteEvent
from shared.realtime_ports import PostOutcome
from tests.fakes import FakeClock, InMemoryJobRepository, job_record
from tests.output_fakes import InMemoryOutputEventStore
from tests.realtime_fakes import FakeGateway, InMemoryConnectionStore
from tests.support.events import output_event_record

ALICE = Caller(tenant="user:alice", sub="alice")
BOB = Caller(tenant="user:bob", sub="bob")


class Stage:
    """The follow route's and the pusher's world: jobs, events, connections and follows, the gateway."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.jobs = InMemoryJobRepository()
        self.events = InMemoryOutputEventStore()
        self.store = InMemoryConnectionStore()
        self.gateway = FakeGateway()

    def connect(self, connection_id: str, owner: Caller = ALICE) -> None:
        connected_at = self.clock.now() - CONNECT_GRACE  # past its handshake
        self.store.add_connection(
            Connection(connection_id=connection_id, owner=owner, connected_at=connected_at)
        )
        self.gateway.connect(connection_id)

    def job(self, owner: Caller = ALICE, **fields: Any) -> JobRecord:
        job = job_record(self.clock.now(), tenant=owner.tenant, owner=owner.sub, stream=True, **fields)
        self.jobs.create_job(job, job.dispatch_at)
        return job

    def write(self, job: JobRecord, attempt: int, *texts: str, first_seq: int = 1) -> list[OutputEvent]:
        written = [
            OutputEvent(job_id=job.job_id, attempt=attempt, seq=seq, text=text)
            for seq, text in enumerate(texts, start=first_seq)
        ]
        for event in written:
            self.events.put_event(event, self.clock.now() + timedelta(hours=24))
        return written

    def send(
        self, connection_id: str, message: dict[str, Any], owner: Caller | None = ALICE
    ) -> dict[str, Any]:
        """One WebSocket message on the follow route; the route response's frame."""
        authorizer = {"tenant": owner.tenant, "sub": owner.sub} if owner else None
        event = RouteEvent.from_event(
            {
                "requestContext": {
                    "routeKey": message.get("action", "follow"),
                    "eventType": "MESSAGE",
                    "connectionId": connection_id,
                    "connectedAt": int((self.clock.now() - CONNECT_GRACE).timestamp() * 1000),
                    "authorizer": authorizer,
                },
                "body": json.dumps(message),
            }
        )
        deps = FollowDependencies(
            jobs=self.jobs, follows=self.store, events=self.events, gateway=self.gateway, clock=self.clock
        )
        answer = handle(deps, event)
        assert answer["statusCode"] == 200
        frame: dict[str, Any] = json.loads(answer["body"])
        return frame

    def pusher(self, records: list[dict[str, Any]]) -> BatchPusher:
        return BatchPusher(
            OutputPusherDependencies(follows=self.store, gateway=self.gateway, clock=self.clock), records
        )

    def received(self, connection_id: str) -> list[dict[str, Any]]:
        return [json.loads(frame) for frame in self.gateway.received[connection_id]]


@pytest.fixture
def stage(clock: FakeClock) -> Stage:
    return Stage(clock)


def _positions(frames: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(frame["attempt"], frame["seq"]) for frame in frames if frame["type"] == "output"]


class TestFollow:
    def test_a_follow_replays_the_events_after_the_cursor_then_says_it_follows(self, stage: Stage) -> None:
        # Given Alice's job with two attempts' events, and her connection
        job = stage.job(status=JobStatus.RUNNING)
        stage.write(job, 1, "cut")
        stage.write(job, 2, "Once", " upon", " a time")
        stage.connect("c1")

        # When she follows it after (2, 1)
        frame = stage.send("c1", {"action": "follow", "jobId": job.job_id, "after": {"attempt": 2, "seq": 1}})

        # Then the events after the cursor came in order, and the answer says it follows
        assert frame == {"type": "following", "jobId": job.job_id}
        assert stage.received("c1") == [
            {"type": "output", "jobId": job.job_id, "attempt": 2, "seq": 2, "text": " upon"},
            {"type": "output", "jobId": job.job_id, "attempt": 2, "seq": 3, "text": " a time"},
        ]
        # And the follow is written, keyed by the job, for the pusher
        assert [f.connection_id for f in stage.store.followers(job.job_id)] == ["c1"]

    def test_without_a_cursor_every_event_is_replayed(self, stage: Stage) -> None:
        job = stage.job()
        stage.write(job, 1, "a", "b")
        stage.connect("c1")

        stage.send("c1", {"action": "follow", "jobId": job.job_id})

        assert _positions(stage.received("c1")) == [(1, 1), (1, 2)]

    @pytest.mark.parametrize("whose", ["another owner's", "missing", "expired"])
    def test_a_job_that_is_not_the_callers_gets_the_same_error_and_nothing_else(
        self, stage: Stage, clock: FakeClock, whose: str
    ) -> None:
        # Given Bob's job with events, a job that does not exist, and one that expired
        bobs = stage.job(owner=BOB)
        stage.write(bobs, 1, "secret")
        expired = stage.job(expires_at=clock.now() - timedelta(seconds=1))
        stage.write(expired, 1, "old")
        job_id = {
            "another owner's": bobs.job_id,
            "missing": "0b7f3c1e-8a4d-4e2b-9c6f-1d2e3f4a5b6c",
            "expired": expired.job_id,
        }[whose]
        stage.connect("c1")

        # When Alice follows it
        frame = stage.send("c1", {"action": "follow", "jobId": job_id})

        # Then she gets one error frame, the same whatever the reason, and no event, no follow
        assert frame == {"type": "error", "code": "job_not_found", "message": "No such job."}
        assert stage.received("c1") == []
        assert stage.store.followers(job_id) == []

    def test_a_connection_follows_at_most_twenty_jobs(self, stage: Stage) -> None:
        stage.connect("c1")
        jobs = [stage.job() for _ in range(21)]
        for job in jobs[:20]:
            assert stage.send("c1", {"action": "follow", "jobId": job.job_id})["type"] == "following"

        frame = stage.send("c1", {"action": "follow", "jobId": jobs[20].job_id})

        assert frame["code"] == "too_many_follows"
        assert stage.store.followers(jobs[20].job_id) == []
        # An unfollow makes room
        assert stage.send("c1", {"action": "unfollow", "jobId": jobs[0].job_id}) == {
            "type": "unfollowed",
            "jobId": jobs[0].job_id,
        }
        assert stage.send("c1", {"action": "follow", "jobId": jobs[20].job_id})["type"] == "following"

    def test_a_message_that_is_no_follow_is_answered_with_an_error(self, stage: Stage) -> None:
        stage.connect("c1")

        assert stage.send("c1", {"action": "follow", "jobId": "x", "after": 3})["code"] == "job_not_found"
        assert stage.send("c1", {"action": "follow"})["code"] == "job_not_found"

    def test_a_replay_to_a_connection_that_went_away_stops(self, stage: Stage) -> None:
        job = stage.job()
        stage.write(job, 1, *[f"w{n}" for n in range(5)])
        stage.connect("c1")
        stage.gateway.open.discard("c1")

        assert stage.send("c1", {"action": "follow", "jobId": job.job_id})["type"] == "following"
        assert stage.gateway.received["c1"] == []

    def test_a_long_replay_is_read_in_pages_and_sent_whole(self, stage: Stage) -> None:
        job = stage.job()
        stage.write(job, 1, *[f"w{n}" for n in range(250)])
        stage.connect("c1")

        stage.send("c1", {"action": "follow", "jobId": job.job_id})

        assert _positions(stage.received("c1")) == [(1, seq) for seq in range(1, 251)]


class TestPusher:
    def test_an_event_reaches_the_connections_that_follow_its_job_and_no_other(self, stage: Stage) -> None:
        # Given Alice following her job on two connections, a third connection of hers, and Bob's
        job = stage.job()
        for connection in ("a1", "a2", "a3"):
            stage.connect(connection)
        stage.connect("b1", owner=BOB)
        stage.send("a1", {"action": "follow", "jobId": job.job_id})
        stage.send("a2", {"action": "follow", "jobId": job.job_id})

        # When the event's record reaches the pusher
        (event,) = stage.write(job, 1, "Once")
        records = [output_event_record(event, 1)]
        pusher = stage.pusher(records)
        for record in records:
            pusher.push(record)

        # Then the followers got it, and nobody else
        frame = {"type": "output", "jobId": job.job_id, "attempt": 1, "seq": 1, "text": "Once"}
        assert stage.received("a1") == stage.received("a2") == [frame]
        assert stage.received("a3") == stage.received("b1") == []

    def test_followers_are_read_once_per_job_per_batch(self, stage: Stage) -> None:
        class Counting(InMemoryConnectionStore):
            reads = 0

            def followers(self, job_id: str) -> list[Follow]:
                Counting.reads += 1
                return super().followers(job_id)

        stage.store = Counting()
        job = stage.job()
        records = [output_event_record(e, n) for n, e in enumerate(stage.write(job, 1, "a", "b", "c"))]
        pusher = stage.pusher(records)
        for record in records:
            pusher.push(record)

        assert Counting.reads == 1

    def test_a_gone_follower_is_forgotten_and_the_others_still_get_the_event(self, stage: Stage) -> None:
        job = stage.job()
        stage.connect("a1")
        stage.connect("a2")
        stage.send("a1", {"action": "follow", "jobId": job.job_id})
        stage.send("a2", {"action": "follow", "jobId": job.job_id})
        stage.gateway.open.discard("a1")

        records = [output_event_record(e, n) for n, e in enumerate(stage.write(job, 1, "x"))]
        stage.pusher(records).push(records[0])

        assert [f.connection_id for f in stage.store.followers(job.job_id)] == ["a2"]
        assert len(stage.received("a2")) == 1

    def test_a_410_during_the_handshake_keeps_the_follower(self, stage: Stage, clock: FakeClock) -> None:
        job = stage.job()
        follow = Follow(job_id=job.job_id, connection_id="new", owner=ALICE, connected_at=clock.now())
        stage.store.follows[job.job_id]["new"] = follow  # following while its handshake completes

        records = [output_event_record(e, n) for n, e in enumerate(stage.write(job, 1, "x"))]
        stage.pusher(records).push(records[0])

        assert stage.store.followers(job.job_id) == [follow]

    def test_a_failed_post_is_counted_not_retried(self, stage: Stage) -> None:
        class Failing(FakeGateway):
            def post(self, connection_id: str, data: str) -> PostOutcome:
                return PostOutcome.FAILED

        job = stage.job()
        stage.connect("a1")
        stage.send("a1", {"action": "follow", "jobId": job.job_id})
        stage.gateway = Failing()
        records = [output_event_record(e, n) for n, e in enumerate(stage.write(job, 1, "x"))]

        stage.pusher(records).push(records[0])  # no error: the record succeeds

        assert len(stage.store.followers(job.job_id)) == 1

    def test_unreadable_followers_fail_the_record(self, stage: Stage) -> None:
        class Unreadable(InMemoryConnectionStore):
            def followers(self, job_id: str) -> list[Follow]:
                raise StorageUnavailableError("throttled")

        stage.store = Unreadable()
        job = stage.job()
        records = [output_event_record(e, n) for n, e in enumerate(stage.write(job, 1, "x"))]

        with pytest.raises(StorageUnavailableError):
            stage.pusher(records).push(records[0])

    def test_records_that_are_not_new_events_are_skipped(self, stage: Stage) -> None:
        job = stage.job()
        stage.connect("a1")
        stage.send("a1", {"action": "follow", "jobId": job.job_id})
        (event,) = stage.write(job, 1, "x")
        removed = output_event_record(event, 1, event_name="REMOVE")  # TTL deleting it
        broken = output_event_record(event, 2)
        broken["dynamodb"]["NewImage"] = {"pk": {"S": "JOB#x"}}
        pusher = stage.pusher([removed, broken])

        pusher.push(removed)
        pusher.push(broken)

        assert stage.received("a1") == []


def test_disconnect_forgets_the_connections_follows(stage: Stage) -> None:
    job = stage.job()
    stage.connect("a1")
    stage.send("a1", {"action": "follow", "jobId": job.job_id})

    stage.store.remove_connection(ALICE, "a1")

    assert stage.store.followers(job.job_id) == []
