"""Live updates, the pure rules: tickets, the connection cap, which updates of a batch are pushed."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest

from shared.contract import Operation
from shared.job import Caller
from shared.lifecycle import JobStatus
from shared.realtime import (
    MAX_CONNECTIONS_PER_OWNER,
    TICKET_TTL,
    BatchPlan,
    Connection,
    JobChange,
    answer_message,
    connections_to_close,
    grant_ticket,
    is_ticket_shaped,
    job_message,
    new_ticket,
    owner_from_context,
    ticket_hash,
)
from tests.fakes import DEFAULT_START, job_record

ALICE = Caller(tenant="user:alice", sub="alice")
NOW = DEFAULT_START


def _counting_bytes(start: int = 0):
    counter = iter(range(start, 10_000))

    def random_bytes(size: int) -> bytes:
        return bytes([next(counter) % 256]) * size

    return random_bytes


class TestTickets:
    def test_a_ticket_is_32_random_bytes_in_unpadded_base64url(self) -> None:
        ticket = new_ticket(lambda size: b"\xff" * size)

        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", ticket)
        assert "=" not in ticket

    def test_too_few_random_bytes_are_refused(self) -> None:
        with pytest.raises(ValueError, match="32"):
            new_ticket(lambda size: b"x" * (size - 1))

    def test_the_store_gets_the_hash_and_the_caller_gets_the_ticket_in_the_url(self) -> None:
        grant, record = grant_ticket(ALICE, NOW, "wss://ws.example/live", _counting_bytes())

        assert record.ticket_hash == ticket_hash(grant.ticket)
        assert record.ticket_hash != grant.ticket
        assert re.fullmatch(r"[0-9a-f]{64}", record.ticket_hash)
        assert record.owner == ALICE
        assert grant.url == f"wss://ws.example/live?ticket={grant.ticket}"
        assert grant.expires_at == record.expires_at == NOW + TICKET_TTL == NOW + timedelta(seconds=60)
        assert grant.to_wire() == {
            "ticket": grant.ticket,
            "url": grant.url,
            "expiresAt": "2030-01-15T12:01:30.250Z",
        }

    def test_a_url_with_a_query_gets_the_ticket_appended(self) -> None:
        grant, _ = grant_ticket(ALICE, NOW, "ws://127.0.0.1:9/ws?x=1", _counting_bytes())

        assert grant.url.endswith(f"?x=1&ticket={grant.ticket}")

    def test_every_ticket_is_different(self) -> None:
        source = _counting_bytes()
        tickets = {grant_ticket(ALICE, NOW, "wss://w/live", source)[0].ticket for _ in range(50)}

        assert len(tickets) == 50

    @pytest.mark.parametrize(
        ("text", "shaped"),
        [
            (new_ticket(lambda n: b"\x01" * n), True),
            ("", False),
            (None, False),
            ("a" * 42, False),
            ("a" * 44, False),
            ("a" * 42 + "=", False),
            ("a" * 42 + "+", False),
            ("é" * 43, False),
        ],
    )
    def test_only_ticket_shaped_text_reaches_the_store(self, text: str | None, shaped: bool) -> None:
        assert is_ticket_shaped(text) is shaped


def _connection(connection_id: str, seconds: int, owner: Caller = ALICE) -> Connection:
    return Connection(connection_id=connection_id, owner=owner, connected_at=NOW + timedelta(seconds=seconds))


class TestConnectionCap:
    def test_ten_connections_are_all_kept(self) -> None:
        connections = [_connection(f"c{i}", i) for i in range(MAX_CONNECTIONS_PER_OWNER)]

        assert connections_to_close(connections) == []

    def test_an_eleventh_closes_the_oldest(self) -> None:
        connections = [_connection(f"c{i}", i) for i in range(11)]

        assert [c.connection_id for c in connections_to_close(reversed(connections))] == ["c0"]

    def test_beyond_the_limit_every_older_one_goes_oldest_first(self) -> None:
        connections = [_connection(f"c{i:02d}", i) for i in range(13)]

        assert [c.connection_id for c in connections_to_close(connections)] == ["c00", "c01", "c02"]

    def test_a_tie_in_time_is_broken_by_the_id(self) -> None:
        connections = [_connection(f"c{i:02d}", 0) for i in range(11)]

        assert [c.connection_id for c in connections_to_close(connections)] == ["c00"]

    def test_a_connection_lives_two_hours(self) -> None:
        assert _connection("c", 0).expires_at == NOW + timedelta(hours=2)

    @pytest.mark.parametrize(
        ("context", "owner"),
        [
            ({"tenant": "acme", "sub": "bob", "principalId": "bob"}, Caller(tenant="acme", sub="bob")),
            ({"sub": "bob"}, None),
            ({"tenant": "", "sub": "bob"}, None),
            ({"tenant": "acme", "sub": 7}, None),
            (None, None),
        ],
    )
    def test_the_owner_comes_from_the_authorizer_context(self, context, owner) -> None:
        assert owner_from_context(context) == owner


def _change(job_id: str, revision: int, kind: str = "claim", sequence: str = "1") -> JobChange:
    job = job_record(NOW, job_id=job_id, status=JobStatus.RUNNING, revision=revision)
    return JobChange(
        sequence_number=sequence,
        owner=ALICE,
        job_id=job_id,
        revision=revision,
        write_kind=kind,
        document=job.status_document(),
    )


class TestBatchPlan:
    def test_only_the_newest_revision_of_a_job_is_pushed(self) -> None:
        changes = [_change("a", 2), _change("a", 4), _change("a", 3)]
        plan = BatchPlan(changes)

        assert [plan.should_push(c) for c in changes] == [False, True, False]

    def test_a_duplicate_of_the_newest_is_pushed_once(self) -> None:
        changes = [_change("a", 4), _change("a", 4)]
        plan = BatchPlan(changes)

        assert [plan.should_push(c) for c in changes] == [True, False]

    def test_jobs_are_planned_independently(self) -> None:
        changes = [_change("a", 2), _change("b", 7), _change("a", 3), _change("b", 1)]
        plan = BatchPlan(changes)

        assert [plan.should_push(c) for c in changes] == [False, True, True, False]

    def test_heartbeats_and_deferrals_are_never_pushed_and_never_win(self) -> None:
        changes = [_change("a", 3), _change("a", 4, kind="heartbeat"), _change("a", 5, kind="defer")]
        plan = BatchPlan(changes)

        assert [plan.should_push(c) for c in changes] == [True, False, False]


class TestMessages:
    def test_an_update_is_the_status_document_in_a_job_frame(self) -> None:
        job = job_record(NOW, operation=Operation.SUMMARIZE, revision=3)

        frame = json.loads(job_message(job.status_document()))

        assert frame == {"type": "job", "job": job.status_document().to_wire()}
        assert frame["job"]["revision"] == 3

    @pytest.mark.parametrize(
        ("body", "answer"),
        [
            ('{"action": "ping"}', {"type": "pong"}),
            ('{"action": "ping", "extra": 1}', {"type": "pong"}),
        ],
    )
    def test_a_ping_gets_a_pong(self, body: str, answer: dict[str, str]) -> None:
        assert answer_message(body) == answer

    @pytest.mark.parametrize(
        ("body", "code"),
        [
            ('{"action": "subscribe"}', "unknown_action"),
            ("[1, 2]", "unknown_action"),
            ("not json", "invalid_message"),
            ("", "invalid_message"),
            (None, "invalid_message"),
            ("[" * 100_000, "invalid_message"),
        ],
    )
    def test_anything_else_gets_an_error(self, body: str | None, code: str) -> None:
        answer = answer_message(body)

        assert answer["type"] == "error"
        assert answer["code"] == code
