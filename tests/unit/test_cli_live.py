"""The CLI's live-update helpers: which pushed documents count, how an update is printed, frames."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outlast.cli.formats import format_update
from outlast.follow import Followed
from outlast.live import Update, job_update


def _body(job_id: str = "j1", status: str = "Running", revision: int = 2, **extra: Any) -> dict[str, Any]:
    return {
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
        "crashes": 0,
        "progress": {"completedSteps": 0, "totalSteps": 1},
        "reservedTokens": None,
        **extra,
    }


def _document(job_id: str = "j1", status: str = "Running", revision: int = 2, **extra: Any) -> Update:
    body = _body(job_id, status, revision, **extra)
    update = job_update(json.dumps({"type": "job", "job": body}))
    assert update is not None
    return update


def _followed(revision: int = 2) -> Followed:
    update = _document(revision=revision)
    return Followed(update.document, update.body)


class TestFollowed:
    def test_a_newer_revision_of_the_job_is_taken(self) -> None:
        followed = _followed(2)

        assert followed.offer(_document(status="Succeeded", revision=3))
        assert followed.document.status == "Succeeded"
        assert followed.terminal

    @pytest.mark.parametrize("revision", [1, 2])
    def test_an_older_or_repeated_revision_is_ignored(self, revision: int) -> None:
        followed = _followed(2)

        assert not followed.offer(_document(status="Pending", revision=revision))
        assert followed.document.status == "Running"

    def test_another_jobs_update_is_ignored(self) -> None:
        followed = _followed(2)

        assert not followed.offer(_document(job_id="j2", status="Succeeded", revision=9))
        assert not followed.terminal


class TestFormatting:
    def test_an_update_line_says_when_which_status_attempts_and_revision(self) -> None:
        line = format_update(_document().document)

        assert line.startswith("2030-01-15 12:00:05Z  j1  Running")
        assert line.endswith("attempts 1  revision 2")

    def test_a_failed_update_ends_with_its_error_code(self) -> None:
        failed = _document(status="Failed", revision=4, error={"code": "content_policy", "message": "m"})

        assert format_update(failed.document).endswith("revision 4  content_policy")


class TestFrames:
    def test_a_job_frame_gives_its_document(self) -> None:
        body = _body()

        update = job_update(json.dumps({"type": "job", "job": body}))

        assert update is not None
        assert update.body == body
        assert update.document.job_id == "j1"

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
        assert job_update(frame) is None
