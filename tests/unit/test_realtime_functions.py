"""The live-update functions' use cases on fakes: tickets, the authorizer, connections, messages,
the notifier."""

from __future__ import annotations

import json
import secrets
from datetime import timedelta
from typing import Any

import pytest

from functions.notifier.dependencies import NotifierDependencies
from functions.notifier.service import BatchNotifier
from functions.tickets.dependencies import TicketsDependencies
from functions.tickets.service import issue_ticket
from functions.tickets.settings import TicketsSettings
from functions.ws_authorizer.dependencies import AuthorizerDependencies
from functions.ws_authorizer.service import ConnectRequest, authorize
from functions.ws_connections.dependencies import ConnectionsDependencies
from functions.ws_connections.service import handle
from functions.ws_messages import service as messages
from functions.ws_messages.dependencies import MessagesDependencies
from functions.ws_messages.dependencies import build_dependencies as build_messages_dependencies
from shared import resources as r
from shared.adapters.job_stream import job_change
from shared.errors import StorageUnavailableError
from shared.job import Caller, JobRecord
from shared.lifecycle import JobStatus
from shared.realtime import CONNECT_GRACE, Connection, RouteEvent, ticket_hash
from shared.realtime_ports import PostOutcome
from shared.webhooks.deliveries import DeliveryEnqueuer
from tests.budget_fakes import InMemoryBudgetLedger
from tests.document_fakes import InMemoryDocumentRepository
from tests.fakes import FakeClock, job_record
from tests.realtime_fakes import FakeGateway, InMemoryConnectionStore
from tests.support.events import job_stream_record as _record
from tests.webhook_fakes import InMemoryEndpointStore, RecordingDeliveryQueue

ALICE = Caller(tenant="user:alice", sub="alice")
BOB = Caller(tenant="user:bob", sub="bob")
METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:abc123/live/$connect"


@pytest.fixture
def store() -> InMemoryConnectionStore:
    return InMemoryConnectionStore()


@pytest.fixture
def gateway() -> FakeGateway:
    return FakeGateway()


def _ticket(store: InMemoryConnectionStore, clock: FakeClock, caller: Caller = ALICE) -> str:
    deps = TicketsDependencies(
        settings=TicketsSettings.model_validate(
            {r.ENV_CONNECTIONS_TABLE: "t", r.ENV_WEBSOCKET_URL: "wss://abc123.example/live"}
        ),
        store=store,
        clock=clock,
        random_bytes=secrets.token_bytes,
    )
    return issue_ticket(deps, caller).ticket


class TestTickets:
    def test_issuing_stores_only_the_hash_with_the_owner(self, store, clock) -> None:
        ticket = _ticket(store, clock)

        (record,) = store.tickets.values()
        assert record.ticket_hash == ticket_hash(ticket)
        assert ticket not in json.dumps({k: str(v) for k, v in vars(record).items()})
        assert record.owner == ALICE
        assert record.expires_at == clock.now() + timedelta(seconds=60)


def _authorize(store: InMemoryConnectionStore, clock: FakeClock, ticket: str | None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "REQUEST", "methodArn": METHOD_ARN, "queryStringParameters": {}}
    if ticket is not None:
        event["queryStringParameters"]["ticket"] = ticket
    return authorize(AuthorizerDependencies(store=store, clock=clock), ConnectRequest.from_event(event))


def _effect(answer: dict[str, Any]) -> str:
    (statement,) = answer["policyDocument"]["Statement"]
    assert statement["Action"] == "execute-api:Invoke"
    assert statement["Resource"] == METHOD_ARN
    return str(statement["Effect"])


class TestAuthorizer:
    def test_a_fresh_ticket_allows_one_connect_with_the_owner_in_the_context(self, store, clock) -> None:
        ticket = _ticket(store, clock)

        answer = _authorize(store, clock, ticket)

        assert _effect(answer) == "Allow"
        assert answer["principalId"] == "alice"
        assert answer["context"] == {"tenant": "user:alice", "sub": "alice"}
        assert store.tickets == {}

    def test_a_second_use_is_denied(self, store, clock) -> None:
        ticket = _ticket(store, clock)
        _authorize(store, clock, ticket)

        answer = _authorize(store, clock, ticket)

        assert _effect(answer) == "Deny"
        assert "context" not in answer

    def test_an_expired_ticket_is_denied(self, store, clock) -> None:
        ticket = _ticket(store, clock)
        clock.advance(seconds=60)

        assert _effect(_authorize(store, clock, ticket)) == "Deny"

    def test_a_ticket_one_millisecond_before_expiry_is_allowed(self, store, clock) -> None:
        ticket = _ticket(store, clock)
        clock.advance(seconds=59, milliseconds=999)

        assert _effect(_authorize(store, clock, ticket)) == "Allow"

    @pytest.mark.parametrize("ticket", [None, "", "made-up", "A" * 43, "A" * 43 + "&ticket=x"])
    def test_a_missing_or_made_up_ticket_is_denied(self, store, clock, ticket) -> None:
        _ticket(store, clock)

        assert _effect(_authorize(store, clock, ticket)) == "Deny"
        assert len(store.tickets) == 1

    def test_a_garbage_ticket_never_reaches_the_store(self, clock) -> None:
        class CountingStore(InMemoryConnectionStore):
            def take_ticket(self, ticket_hash: str, now: Any) -> Caller | None:
                raise AssertionError("the store was asked")

        assert _effect(_authorize(CountingStore(), clock, "../../etc")) == "Deny"


def _route(route_key: str, connection_id: str, owner: Caller | None, connected_ms: int) -> RouteEvent:
    authorizer = {"principalId": owner.sub, "tenant": owner.tenant, "sub": owner.sub} if owner else None
    return RouteEvent.from_event(
        {
            "requestContext": {
                "routeKey": route_key,
                "eventType": "CONNECT" if route_key == "$connect" else "DISCONNECT",
                "connectionId": connection_id,
                "connectedAt": connected_ms,
                "authorizer": authorizer,
            }
        }
    )


class TestConnections:
    def _deps(self, store, gateway, clock) -> ConnectionsDependencies:
        return ConnectionsDependencies(store=store, gateway=gateway, clock=clock)

    def test_connect_records_the_connection_under_its_owner(self, store, gateway, clock) -> None:
        answer = handle(self._deps(store, gateway, clock), _route("$connect", "c1", ALICE, 1_700_000_000_000))

        assert answer == {"statusCode": 200}
        (connection,) = store.connections_of(ALICE)
        assert connection.connection_id == "c1"
        assert connection.connected_at.timestamp() == 1_700_000_000
        assert store.connections_of(BOB) == []

    def test_an_eleventh_connection_closes_and_forgets_the_oldest(self, store, gateway, clock) -> None:
        deps = self._deps(store, gateway, clock)
        for i in range(10):
            gateway.connect(f"c{i}")
            handle(deps, _route("$connect", f"c{i}", ALICE, 1_700_000_000_000 + i))
        handle(deps, _route("$connect", "c0-bob", BOB, 1_699_000_000_000))

        handle(deps, _route("$connect", "c10", ALICE, 1_700_000_000_010))

        assert gateway.closed == ["c0"]
        assert sorted(c.connection_id for c in store.connections_of(ALICE)) == sorted(
            f"c{i}" for i in range(1, 11)
        )
        assert [c.connection_id for c in store.connections_of(BOB)] == ["c0-bob"]

    def test_connect_without_an_owner_is_refused(self, store, gateway, clock) -> None:
        answer = handle(self._deps(store, gateway, clock), _route("$connect", "c1", None, 1))

        assert answer["statusCode"] == 403
        assert store.writes == []

    def test_disconnect_forgets_the_connection(self, store, gateway, clock) -> None:
        deps = self._deps(store, gateway, clock)
        handle(deps, _route("$connect", "c1", ALICE, 1))
        handle(deps, _route("$connect", "c2", ALICE, 2))

        assert handle(deps, _route("$disconnect", "c1", ALICE, 1)) == {"statusCode": 200}

        assert [c.connection_id for c in store.connections_of(ALICE)] == ["c2"]


class TestMessages:
    def test_the_answer_to_the_body_is_the_route_response(self) -> None:
        # Given an answerer that records what it was asked
        asked: list[str | None] = []

        def answer(body: str | None) -> dict[str, Any]:
            asked.append(body)
            return {"type": "pong"}

        # When a message is handled
        response = messages.handle(MessagesDependencies(answer=answer), '{"action": "ping"}')

        # Then its body was answered, and the answer is the route response's body
        assert asked == ['{"action": "ping"}']
        assert response == {"statusCode": 200, "body": json.dumps({"type": "pong"})}

    def test_the_root_wires_the_shared_answer_without_settings(self) -> None:
        deps = build_messages_dependencies()

        assert deps is build_messages_dependencies()  # once per container
        assert deps.answer('{"action": "ping"}') == {"type": "pong"}
        assert deps.answer("not json")["code"] == "invalid_message"


def _job_at(job: JobRecord, revision: int, status: JobStatus) -> JobRecord:
    return job.model_copy(update={"revision": revision, "status": status})


def _notify(store, gateway, records: list[dict[str, Any]], clock: FakeClock) -> None:
    notifier = BatchNotifier(
        NotifierDependencies(
            store=store,
            gateway=gateway,
            read_change=job_change,
            webhooks=_no_webhooks(),
            budgets=InMemoryBudgetLedger(),
            clock=clock,
            documents=InMemoryDocumentRepository(),
        ),
        records,
    )
    for record in records:
        notifier.push(record)


def _no_webhooks() -> DeliveryEnqueuer:
    """The webhook step with no endpoint registered: these tests are about the WebSocket pushes."""
    return DeliveryEnqueuer(InMemoryEndpointStore(), RecordingDeliveryQueue())


def _revisions(gateway: FakeGateway, connection_id: str) -> list[int]:
    return [json.loads(frame)["job"]["revision"] for frame in gateway.received[connection_id]]


class TestNotifier:
    @pytest.fixture
    def alices_job(self, clock) -> JobRecord:
        return job_record(clock.now(), tenant=ALICE.tenant, owner=ALICE.sub)

    def _open(self, store, gateway, owner: Caller, connection_id: str, clock) -> None:
        store.add_connection(Connection(connection_id=connection_id, owner=owner, connected_at=clock.now()))
        gateway.connect(connection_id)

    def test_a_change_reaches_every_connection_of_the_owner_and_no_one_else(
        self, store, gateway, clock, alices_job
    ) -> None:
        for owner, connection_id in ((ALICE, "a1"), (ALICE, "a2"), (BOB, "b1")):
            self._open(store, gateway, owner, connection_id, clock)

        _notify(store, gateway, [_record(alices_job, 1, kind="submit", event_name="INSERT")], clock)

        for connection_id in ("a1", "a2"):
            (frame,) = gateway.received[connection_id]
            assert json.loads(frame) == {"type": "job", "job": alices_job.status_document().to_wire()}
        assert gateway.received["b1"] == []

    def test_out_of_order_and_duplicate_records_push_only_the_newest_once(
        self, store, gateway, clock, alices_job
    ) -> None:
        self._open(store, gateway, ALICE, "a1", clock)
        running = _job_at(alices_job, 2, JobStatus.RUNNING)
        done = _job_at(alices_job, 4, JobStatus.SUCCEEDED)
        records = [_record(running, 1), _record(done, 2, "terminal"), _record(running, 3), _record(done, 4)]

        _notify(store, gateway, records, clock)

        assert _revisions(gateway, "a1") == [4]

    def test_a_heartbeat_record_is_never_pushed(self, store, gateway, clock, alices_job) -> None:
        self._open(store, gateway, ALICE, "a1", clock)

        _notify(store, gateway, [_record(_job_at(alices_job, 3, JobStatus.RUNNING), 1, "heartbeat")], clock)

        assert gateway.received["a1"] == []

    def test_inputs_results_and_removes_are_not_job_changes(self, store, gateway, clock, alices_job) -> None:
        self._open(store, gateway, ALICE, "a1", clock)
        removed = _record(alices_job, 1, event_name="REMOVE")
        an_input = _record(alices_job, 2)
        an_input["dynamodb"]["NewImage"][r.TYPE_ATTRIBUTE] = {"S": r.INPUT_ITEM_TYPE}

        _notify(store, gateway, [removed, an_input], clock)

        assert gateway.received["a1"] == []

    def test_a_gone_connection_is_forgotten_and_the_others_still_get_the_update(
        self, store, gateway, clock, alices_job
    ) -> None:
        self._open(store, gateway, ALICE, "a1", clock)
        store.add_connection(
            Connection(connection_id="ghost", owner=ALICE, connected_at=clock.now() - CONNECT_GRACE)
        )

        _notify(store, gateway, [_record(alices_job, 1, "submit", "INSERT")], clock)

        assert [c.connection_id for c in store.connections_of(ALICE)] == ["a1"]
        assert _revisions(gateway, "a1") == [1]

    def test_a_410_during_the_handshake_keeps_the_connection_for_the_next_updates(
        self, store, gateway, clock, alices_job
    ) -> None:
        # $connect recorded it; API Gateway answers 410 until the handshake completes (issue 22).
        store.add_connection(Connection(connection_id="opening", owner=ALICE, connected_at=clock.now()))
        clock.advance(CONNECT_GRACE - timedelta(milliseconds=1))
        _notify(store, gateway, [_record(alices_job, 1, "submit", "INSERT")], clock)
        gateway.connect("opening")

        _notify(store, gateway, [_record(_job_at(alices_job, 2, JobStatus.SUCCEEDED), 2, "terminal")], clock)

        assert [c.connection_id for c in store.connections_of(ALICE)] == ["opening"]
        assert _revisions(gateway, "opening") == [2]

    def test_a_failing_post_does_not_fail_the_record(self, store, clock, alices_job) -> None:
        class FlakyGateway(FakeGateway):
            def post(self, connection_id: str, data: str) -> PostOutcome:
                if connection_id == "a1":
                    return PostOutcome.FAILED
                return super().post(connection_id, data)

        gateway = FlakyGateway()
        self._open(store, gateway, ALICE, "a1", clock)
        self._open(store, gateway, ALICE, "a2", clock)

        _notify(store, gateway, [_record(alices_job, 1, "submit", "INSERT")], clock)

        assert _revisions(gateway, "a2") == [1]
        assert len(store.connections_of(ALICE)) == 2  # a failure is not a 410: the connection stays

    def test_an_unreadable_connection_store_fails_the_record(self, gateway, clock, alices_job) -> None:
        class DownStore(InMemoryConnectionStore):
            def connections_of(self, owner: Caller) -> list[Connection]:
                raise StorageUnavailableError("down")

        records = [_record(alices_job, 1, "submit", "INSERT")]
        notifier = BatchNotifier(
            NotifierDependencies(
                store=DownStore(),
                gateway=gateway,
                read_change=job_change,
                webhooks=_no_webhooks(),
                budgets=InMemoryBudgetLedger(),
                clock=clock,
                documents=InMemoryDocumentRepository(),
            ),
            records,
        )

        with pytest.raises(StorageUnavailableError):
            notifier.push(records[0])

    def test_an_unreadable_job_record_is_skipped(self, store, gateway, clock, alices_job) -> None:
        self._open(store, gateway, ALICE, "a1", clock)
        broken = _record(alices_job, 1)
        del broken["dynamodb"]["NewImage"]["status"]
        good = _record(_job_at(alices_job, 2, JobStatus.RUNNING), 2)

        _notify(store, gateway, [broken, good], clock)

        assert _revisions(gateway, "a1") == [2]

    def test_the_owners_connections_are_read_once_per_batch(self, gateway, clock) -> None:
        class CountingStore(InMemoryConnectionStore):
            reads = 0

            def connections_of(self, owner: Caller) -> list[Connection]:
                CountingStore.reads += 1
                return super().connections_of(owner)

        store = CountingStore()
        self._open(store, gateway, ALICE, "a1", clock)
        jobs = [job_record(clock.now(), tenant=ALICE.tenant, owner=ALICE.sub) for _ in range(3)]

        _notify(store, gateway, [_record(job, i, "submit", "INSERT") for i, job in enumerate(jobs)], clock)

        assert CountingStore.reads == 1
        assert len(gateway.received["a1"]) == 3
