"""Identifiers: random job ids for callers, time-ordered sequence ids for list order."""

from __future__ import annotations

import os
import re
import threading
import time
import uuid

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
JOB_ID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

_sequence_lock = threading.Lock()
_last_sequence_ns = 0


def new_job_id() -> str:
    """A lowercase UUIDv4: unguessable, so a job id alone reveals nothing about other jobs."""
    return str(uuid.uuid4())


def new_document_id() -> str:
    """A lowercase UUIDv4, like a job id: it names the document's objects, so it is unguessable."""
    return str(uuid.uuid4())


def normalize_job_id(text: str) -> str | None:
    """The canonical lowercase form of a UUID string, or None when it is not one."""
    lowered = text.lower()
    return lowered if _UUID.fullmatch(lowered) else None


def new_sequence_id() -> str:
    """A time-ordered id (UUIDv7 layout, nanosecond clock, monotonic per process).

    It breaks ties between jobs created in the same millisecond, so the list keeps
    strict submission order; the random tail keeps ids from two processes distinct.
    """
    global _last_sequence_ns  # noqa: PLW0603 - the monotonic guard is process state by nature
    with _sequence_lock:
        now_ns = max(time.time_ns(), _last_sequence_ns + 1)
        _last_sequence_ns = now_ns
    millis, sub_ms = divmod(now_ns, 1_000_000)
    # 12 bits of sub-millisecond fraction in rand_a (RFC 9562, method 3), then 62 random bits.
    fraction = sub_ms * 4096 // 1_000_000
    tail = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (millis & ((1 << 48) - 1)) << 80 | 0x7 << 76 | fraction << 64 | 0b10 << 62 | tail
    return str(uuid.UUID(int=value))
