"""Opaque, tamper-proof list cursors.

A cursor is the position after the last item of a page, signed with HMAC-SHA256 over the
position, the caller and the status filter. A caller can neither forge a position nor reuse
another caller's cursor (or its own with another filter): all three fail verification.
"""

import base64
import binascii
import hashlib
import hmac
import json

from pydantic import BaseModel, ConfigDict, ValidationError

from shared.errors import InvalidCursorError
from shared.job import Caller

_VERSION = 1
_MAC_BYTES = 16
MAX_CURSOR_CHARS = 1024


class ListPosition(BaseModel):
    """Where a page ended in the owner's index: the sort key and the job id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    list_key: str
    job_id: str


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    v: int
    k: str
    j: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorCodec:
    """Signs and verifies cursors with one secret key."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the cursor secret must be at least 16 bytes")
        self._secret = secret

    def _mac(self, caller: Caller, status: str | None, payload: bytes) -> bytes:
        bound = json.dumps([caller.tenant, caller.sub, status or ""]).encode("utf-8")
        return hmac.new(self._secret, bound + b"\n" + payload, hashlib.sha256).digest()[:_MAC_BYTES]

    def encode(self, caller: Caller, status: str | None, position: ListPosition) -> str:
        """The opaque token a client sends back to get the next page."""
        payload = _Payload(v=_VERSION, k=position.list_key, j=position.job_id).model_dump_json().encode()
        return f"{_b64(payload)}.{_b64(self._mac(caller, status, payload))}"

    def decode(self, caller: Caller, status: str | None, cursor: str) -> ListPosition:
        """The position a cursor names, or InvalidCursorError if it was not issued for this request."""
        invalid = InvalidCursorError("The cursor is not valid for this request.")
        if len(cursor) > MAX_CURSOR_CHARS or cursor.count(".") != 1:
            raise invalid
        encoded_payload, encoded_mac = cursor.split(".")
        try:
            payload = _unb64(encoded_payload)
            mac = _unb64(encoded_mac)
        except (binascii.Error, ValueError):
            raise invalid from None
        if not hmac.compare_digest(mac, self._mac(caller, status, payload)):
            raise invalid
        try:
            parsed = _Payload.model_validate_json(payload)
        except ValidationError:
            raise invalid from None
        if parsed.v != _VERSION:
            raise invalid
        return ListPosition(list_key=parsed.k, job_id=parsed.j)
