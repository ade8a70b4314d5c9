"""Every job message goes out in its tenant's MessageGroupId (DESIGN.md, "Fairness between tenants")."""

from __future__ import annotations

from typing import Any

import pytest

from shared.adapters.sqs_queue import SqsJobQueue
from shared.fairness import MAX_MESSAGE_GROUP_LENGTH, message_group
from shared.ports import JobMessage


class TestMessageGroup:
    def test_a_tenant_sqs_accepts_is_its_own_group(self) -> None:
        assert message_group("acme") == "acme"
        assert message_group("user:alice") == "user:alice"
        assert message_group("t" * MAX_MESSAGE_GROUP_LENGTH) == "t" * MAX_MESSAGE_GROUP_LENGTH

    @pytest.mark.parametrize("tenant", ["t" * (MAX_MESSAGE_GROUP_LENGTH + 1), "acmé", "a b", ""])
    def test_a_tenant_sqs_would_refuse_is_hashed_to_a_valid_group(self, tenant: str) -> None:
        group = message_group(tenant)
        assert group.startswith("sha256:")
        assert len(group) <= MAX_MESSAGE_GROUP_LENGTH
        assert group.isascii()
        assert " " not in group

    def test_the_hash_is_stable_and_one_per_tenant(self) -> None:
        long_a, long_b = "a" * 200, "a" * 199 + "b"
        assert message_group(long_a) == message_group(long_a)
        assert message_group(long_a) != message_group(long_b)


class RecordingSqs:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def send_message(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("send_message", kwargs))
        return {}

    def send_message_batch(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("send_message_batch", kwargs))
        return {"Failed": []}


class TestTheQueueAdapter:
    def test_send_and_send_batch_carry_the_group(self) -> None:
        sqs = RecordingSqs()
        queue = SqsJobQueue(sqs, "https://sqs.example/jobs")  # type: ignore[arg-type]

        queue.send(JobMessage(job_id="j1", trace_id="t1", group="acme"), 5)
        queue.send_batch([JobMessage(job_id="j2", trace_id="t2", group="globex")])

        (_, single), (_, batch) = sqs.calls
        assert single["MessageGroupId"] == "acme"
        assert batch["Entries"][0]["MessageGroupId"] == "globex"

    def test_a_message_without_a_group_is_never_sent(self) -> None:
        sqs = RecordingSqs()
        queue = SqsJobQueue(sqs, "https://sqs.example/jobs")  # type: ignore[arg-type]

        with pytest.raises(ValueError, match="MessageGroupId"):
            queue.send(JobMessage(job_id="j1", trace_id="t1"))
        assert sqs.calls == []
