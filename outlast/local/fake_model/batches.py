"""The fake model's Batch API: `/v1/files` and `/v1/batches`, as OpenAI shapes them, without sockets.

A batch is a JSONL input file of Chat Completions requests (`custom_id`, `method`, `url`,
`body`). It is `in_progress` from its creation until `batch_seconds` have passed; the first
retrieve after that runs every line through the fake model (the same answers, faults and call log
as a chat call) and completes it: answered lines go to its output file, refused ones to its error
file, in OpenAI's line shape. A line whose messages carry `[[fault:batch_expired]]` is never run:
the batch ends `expired` and the line is in its error file with code `batch_expired` (OpenAI's
answer for a request its batch did not reach in the completion window); the others complete. A
cancelled batch (`POST /v1/batches/{id}/cancel`) runs nothing. `GET /v1/batches` lists batches
newest first, as OpenAI pages them (`limit`, `after`, `has_more`), with the `metadata` each was
created with; a list describes, it never runs a batch (only a retrieve does). Time is the
caller's (`now`), so the desk is a pure state machine under a lock.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from outlast.local.fake_model.calls import CallOutcome
from outlast.local.fake_model.replies import Reply, error_reply

DEFAULT_BATCH_SECONDS = 3.0
COMPLETION_WINDOW = "24h"
_WINDOW_SECONDS = 24 * 3600
_EXPIRED = re.compile(r"\[\[fault:batch_expired\]\]")
# OpenAI's list: 20 batches a page unless `limit` says otherwise (1 to 100).
DEFAULT_LIST_LIMIT = 20
MAX_LIST_LIMIT = 100

# One chat call through the fake model: the request body in, the answer and its log entry out.
RunCall = Callable[[bytes], tuple[Reply, CallOutcome]]


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
        }


@dataclass
class _Batch:
    id: str
    input_file_id: str
    endpoint: str
    created_at: float
    metadata: dict[str, str] | None
    status: str = "in_progress"
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})
    ended_at: float | None = None

    def describe(self) -> dict[str, Any]:
        ended = int(self.ended_at) if self.ended_at is not None else None
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": None,
            "input_file_id": self.input_file_id,
            "completion_window": COMPLETION_WINDOW,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": int(self.created_at),
            "in_progress_at": int(self.created_at),
            "expires_at": int(self.created_at) + _WINDOW_SECONDS,
            "completed_at": ended if self.status == "completed" else None,
            "expired_at": ended if self.status == "expired" else None,
            "cancelled_at": ended if self.status == "cancelled" else None,
            "failed_at": None,
            "finalizing_at": ended,
            "request_counts": dict(self.counts),
            "metadata": self.metadata,
        }


def _not_found(kind: str, ident: str) -> Reply:
    return error_reply(404, f"No such {kind}: '{ident}'.", "invalid_request_error", None)


class BatchDesk:
    """Files and batches, each batch completed on the first retrieve `batch_seconds` after its creation."""

    def __init__(self, run_call: RunCall, batch_seconds: float = DEFAULT_BATCH_SECONDS) -> None:
        self._run_call = run_call
        self.batch_seconds = batch_seconds
        self._lock = threading.Lock()
        self._files: dict[str, _File] = {}
        self._batches: dict[str, _Batch] = {}

    def upload(self, filename: str, purpose: str, content: bytes, now: float) -> Reply:
        """`POST /v1/files`."""
        if purpose != "batch":
            return error_reply(400, "Only purpose 'batch' is served here.", "invalid_request_error", None)
        with self._lock:
            stored = self._store(filename, purpose, content, now)
        return Reply(200, stored.describe())

    def file(self, file_id: str) -> Reply:
        """`GET /v1/files/{id}`."""
        with self._lock:
            found = self._files.get(file_id)
        return Reply(200, found.describe()) if found else _not_found("file", file_id)

    def content(self, file_id: str) -> bytes | None:
        """`GET /v1/files/{id}/content`: the file's bytes, or None when there is no such file."""
        with self._lock:
            found = self._files.get(file_id)
        return found.content if found else None

    def create(self, body: dict[str, Any], now: float) -> Reply:
        """`POST /v1/batches`."""
        input_file_id = str(body.get("input_file_id", ""))
        if (
            body.get("endpoint") != "/v1/chat/completions"
            or body.get("completion_window") != COMPLETION_WINDOW
        ):
            message = "endpoint must be /v1/chat/completions and completion_window 24h."
            return error_reply(400, message, "invalid_request_error", None)
        with self._lock:
            source = self._files.get(input_file_id)
            if source is None:
                return _not_found("file", input_file_id)
            batch = _Batch(
                f"batch_{uuid.uuid4().hex}", input_file_id, "/v1/chat/completions", now, body.get("metadata")
            )
            batch.counts["total"] = len(_lines(source.content))
            self._batches[batch.id] = batch
        return Reply(200, batch.describe())

    def retrieve(self, batch_id: str, now: float) -> Reply:
        """`GET /v1/batches/{id}`: a batch due by now is run and ended first."""
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return _not_found("batch", batch_id)
            if batch.status == "in_progress" and now >= batch.created_at + self.batch_seconds:
                self._run(batch, now)
            return Reply(200, batch.describe())

    def list_batches(self, limit: int = DEFAULT_LIST_LIMIT, after: str | None = None) -> Reply:
        """`GET /v1/batches`: newest first, `limit` a page, from the batch after `after`."""
        if not 1 <= limit <= MAX_LIST_LIMIT:
            return error_reply(400, "limit must be between 1 and 100.", "invalid_request_error", "limit")
        with self._lock:
            newest_first = list(reversed(self._batches.values()))  # created in order
            start = 0
            if after is not None:
                ids = [batch.id for batch in newest_first]
                if after not in ids:
                    return _not_found("batch", after)
                start = ids.index(after) + 1
            page = newest_first[start : start + limit]
            has_more = start + limit < len(newest_first)
            data = [batch.describe() for batch in page]
        return Reply(
            200,
            {
                "object": "list",
                "data": data,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
                "has_more": has_more,
            },
        )

    def cancel(self, batch_id: str, now: float) -> Reply:
        """`POST /v1/batches/{id}/cancel`: a batch not yet ended runs nothing more."""
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is None:
                return _not_found("batch", batch_id)
            if batch.status == "in_progress":
                batch.status, batch.ended_at = "cancelled", now
            return Reply(200, batch.describe())

    def _store(self, filename: str, purpose: str, content: bytes, now: float) -> _File:
        stored = _File(f"file-{uuid.uuid4().hex}", filename, purpose, content, int(now))
        self._files[stored.id] = stored
        return stored

    def _run(self, batch: _Batch, now: float) -> None:
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        expired = False
        for line in _lines(self._files[batch.input_file_id].content):
            custom_id, body = str(line.get("custom_id", "")), line.get("body", {})
            raw = json.dumps(body).encode()
            if _EXPIRED.search(raw.decode()):
                expired = True
                message = "This request could not be executed before the completion window expired."
                errors.append(_line(custom_id, None, {"code": "batch_expired", "message": message}))
                continue
            reply, _ = self._run_call(raw)
            response = {
                "status_code": reply.status,
                "request_id": f"req_{uuid.uuid4().hex}",
                "body": reply.body,
            }
            (outputs if reply.status == 200 else errors).append(_line(custom_id, response, None))
        batch.counts["completed"], batch.counts["failed"] = len(outputs), len(errors)
        if outputs:
            batch.output_file_id = self._store("batch_output.jsonl", "batch_output", _jsonl(outputs), now).id
        if errors:
            batch.error_file_id = self._store("batch_errors.jsonl", "batch_output", _jsonl(errors), now).id
        batch.status, batch.ended_at = ("expired" if expired else "completed"), now


def _line(custom_id: str, response: dict[str, Any] | None, error: dict[str, str] | None) -> dict[str, Any]:
    return {
        "id": f"batch_req_{uuid.uuid4().hex}",
        "custom_id": custom_id,
        "response": response,
        "error": error,
    }


def _lines(content: bytes) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in content.decode().splitlines() if raw.strip()]


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()
