"""Idempotency keys, their scope, and the fingerprint of what the client sent."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from shared.errors import InvalidIdempotencyKeyError, MissingIdempotencyKeyError
from shared.job import Caller

SUBMIT_ROUTE = "POST /v1/jobs"
MAX_KEY_CHARS = 255
_VISIBLE_ASCII = re.compile(r"[\x21-\x7e]{1,255}")


def parse_idempotency_key(raw: str | None) -> str:
    """The key as the client meant it: one pair of surrounding double quotes stripped (IETF draft)."""
    if raw is None or raw == "":
        raise MissingIdempotencyKeyError("The Idempotency-Key header is required.")
    key = raw[1:-1] if len(raw) >= 2 and raw.startswith('"') and raw.endswith('"') else raw
    if not _VISIBLE_ASCII.fullmatch(key):
        raise InvalidIdempotencyKeyError(
            f"Idempotency-Key must be 1-{MAX_KEY_CHARS} visible ASCII characters (0x21-0x7E)."
        )
    return key


def _sha256(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def scope_hash(caller: Caller, key: str) -> str:
    """One id for (tenant, owner, route, key); a JSON array keeps the parts from running together."""
    return _sha256([caller.tenant, caller.sub, SUBMIT_ROUTE, key])


def fingerprint(client_fields: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of exactly what the client sent (no server-side defaults)."""
    return _sha256(client_fields)
