"""Streaming output's pure rules: the cursor, the frames, the follow messages (shared.output)."""

from __future__ import annotations

import json

import pytest

from shared.output import (
    START,
    FollowRefused,
    OutputCursor,
    OutputEvent,
    job_not_found,
    output_message,
    parse_follow,
)

JOB = "6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b"


class TestCursor:
    @pytest.mark.parametrize(("text", "cursor"), [("0.0", START), ("2.15", OutputCursor(2, 15))])
    def test_attempt_dot_seq_parses_and_prints_back(self, text: str, cursor: OutputCursor) -> None:
        assert OutputCursor.parse(text) == cursor
        assert str(cursor) == text

    @pytest.mark.parametrize("text", ["", "1", "1.", ".1", "01.1", "1.-1", "a.b", "1.2.3", "1000000000.0"])
    def test_anything_else_is_refused(self, text: str) -> None:
        with pytest.raises(ValueError, match=r"ATTEMPT\.SEQ"):
            OutputCursor.parse(text)

    def test_cursors_order_as_the_events_do(self) -> None:
        assert OutputCursor(1, 99) < OutputCursor(2, 1) < OutputCursor(2, 2)


def test_an_output_frame_names_the_job_attempt_seq_and_text() -> None:
    frame = json.loads(output_message(OutputEvent(job_id=JOB, attempt=2, seq=7, text="naïve ✓")))

    assert frame == {"type": "output", "jobId": JOB, "attempt": 2, "seq": 7, "text": "naïve ✓"}


class TestFollowMessages:
    def test_a_follow_without_a_cursor_starts_before_every_event(self) -> None:
        request = parse_follow(json.dumps({"action": "follow", "jobId": JOB.upper()}))

        assert (request.action, request.job_id, request.after) == ("follow", JOB, START)

    def test_a_follow_with_a_cursor_goes_on_after_it(self) -> None:
        request = parse_follow(
            json.dumps({"action": "follow", "jobId": JOB, "after": {"attempt": 2, "seq": 5}})
        )

        assert request.after == OutputCursor(2, 5)

    def test_an_unfollow_names_its_job(self) -> None:
        assert parse_follow(json.dumps({"action": "unfollow", "jobId": JOB})).action == "unfollow"

    @pytest.mark.parametrize("job_id", ["not-a-uuid", 42, None, "../" + JOB])
    def test_something_that_is_no_job_id_is_no_such_job(self, job_id: object) -> None:
        with pytest.raises(FollowRefused) as refused:
            parse_follow(json.dumps({"action": "follow", "jobId": job_id}))

        assert refused.value.frame() == job_not_found().frame()

    @pytest.mark.parametrize(
        "body",
        [
            "not json",
            "[]",
            json.dumps({"action": "watch", "jobId": JOB}),
            json.dumps({"action": "follow", "jobId": JOB, "after": [1, 2]}),
            json.dumps({"action": "follow", "jobId": JOB, "after": {"attempt": -1, "seq": 0}}),
            json.dumps({"action": "follow", "jobId": JOB, "after": {"attempt": True, "seq": 0}}),
            json.dumps({"action": "follow", "jobId": JOB, "after": {"attempt": 1.5, "seq": 0}}),
        ],
    )
    def test_a_message_that_is_not_a_follow_is_invalid(self, body: str) -> None:
        with pytest.raises(FollowRefused) as refused:
            parse_follow(body)

        assert refused.value.code == "invalid_message"
