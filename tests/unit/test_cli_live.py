"""The CLI's live-update helpers: which pushed documents count, how an update is printed, frames."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from outlast.client import StatusDocument
from outlast.commands.jobs import Followed, format_update
from outlast.live import _job_document


def _document(job_id: str = "j1", status: str = "Running", revision: int = 2, **extra: Any) -> StatusDocument:
    return cast(
        StatusDocument,
        {
            "jobId": job_id,
            "status": status,
            "operation": "summarize",
            "createdAt": "2030-01-15T12:00:00.000Z",
            "updatedAt": "2030-01-15T12:00:05.250Z",
            "expiresAt": "2030-02-14T12:00:00.000Z",
            "attempts": 1,
            "revision": revision,
            "cancelRequestedAt": None,
            "resultUrl": None,
            "error": None,
            "usage": None,
            **extra,
        },
    )


class TestFollowed:
    def test_a_newer_revision_of_the_job_is_taken(self) -> None:
        followed = Followed(_document(revision=2))

        assert followed.offer(_document(status="Succeeded", revision=3))
        assert followed.document["status"] == "Succeeded"
        assert followed.terminal

    @pytest.mark.parametrize("revision", [1, 2])
    def test_an_older_or_repeated_revision_is_ignored(self, revision: int) -> None:
        followed = Followed(_document(revision=2))

        assert not followed.offer(_document(status="Pending", revision=revision))
        assert followed.document["status"] == "Running"

    def test_another_jobs_update_is_ignored(self) -> None:
        followed = Followed(_document(revision=2))

        assert not followed.offer(_document(job_id="j2", status="Succeeded", revision=9))
        assert not followed.terminal


class TestFormatting:
    def test_an_update_line_says_when_which_status_attempts_and_revision(self) -> None:
        line = format_update(_document())

        assert line.startswith("2030-01-15 12:00:05Z  j1  Running")
        assert line.endswith("attempts 1  revision 2")

    def test_a_failed_update_ends_with_its_error_code(self) -> None:
        failed = _document(status="Failed", revision=4, error={"code": "content_policy", "message": "m"})

        assert format_update(failed).endswith("revision 4  content_policy")


class TestFrames:
    def test_a_job_frame_gives_its_document(self) -> None:
        document = _document()

        assert _job_document(json.dumps({"type": "job", "job": document})) == document

    @pytest.mark.parametrize(
        "frame",
        [
            json.dumps({"type": "pong"}),
            json.dumps({"type": "job", "job": {"status": "Running"}}),
            json.dumps({"message": "Internal server error"}),
            "not json",
            "[]",
        ],
    )
    def test_anything_else_is_skipped(self, frame: str) -> None:
        assert _job_document(frame) is None
