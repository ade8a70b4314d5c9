"""Standard Webhooks v1, symmetric: secrets, the three headers, and their verification.

The scheme (standardwebhooks.com, "Signature scheme"): the signed content is
`{webhook-id}.{webhook-timestamp}.{body}`, the signature is `v1,` + base64 of its HMAC-SHA256
under the secret's decoded bytes, and `webhook-signature` lists one such entry per signing
secret, space-separated, so that a receiver keeps verifying while a secret is rotated.
Written here rather than taken from the `standardwebhooks` package: docs/architecture.md
("Webhooks") says why.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping, Sequence

from shared.errors import WebhookSignatureError

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format's prefix, not a secret
SECRET_BYTES = 32
DEFAULT_TOLERANCE_SECONDS = 5 * 60
ROTATION_OVERLAP_SECONDS = 24 * 60 * 60

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"

_VERSION = "v1"
# The spec's bounds for a symmetric key: at least 24 bytes (192 bits), at most 64 (512 bits).
_MIN_KEY_BYTES = 24
_MAX_KEY_BYTES = 64
# Visible ASCII only: safe in a header, and no space to confuse the signature list.
_MESSAGE_ID = re.compile(r"[\x21-\x7e]{1,256}")
_TIMESTAMP = re.compile(r"[0-9]{1,12}")


def generate_secret() -> str:
    """A new signing secret: `whsec_` + base64 of 32 bytes from the operating system's CSPRNG."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key a `whsec_` secret stands for: its decoded bytes (padding may be left out)."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a signing secret starts with {SECRET_PREFIX}")
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except binascii.Error:
        # The message never repeats the secret: errors end up in logs.
        raise ValueError("a signing secret is base64 after its prefix") from None
    if not _MIN_KEY_BYTES <= len(key) <= _MAX_KEY_BYTES:
        raise ValueError(f"a signing secret holds {_MIN_KEY_BYTES} to {_MAX_KEY_BYTES} bytes")
    return key


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """One `webhook-signature` entry: `v1,` + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}"))."""
    return f"{_VERSION},{base64.b64encode(_digest(secret_key(secret), message_id, timestamp, body)).decode()}"


def signature_header(signing_secrets: Sequence[str], message_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value: one entry per secret, in the order given, space-separated."""
    _require_secret_list(signing_secrets)
    return " ".join(sign(secret, message_id, timestamp, body) for secret in signing_secrets)


def signed_headers(
    signing_secrets: Sequence[str], message_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers of one attempt (a fresh timestamp at every attempt)."""
    return {
        ID_HEADER: message_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature_header(signing_secrets, message_id, timestamp, body),
    }


def signing_secrets(current: str, previous: str | None, previous_until: int | None, now: int) -> list[str]:
    """The secrets that sign at `now`: the current one, and the previous one until its overlap ends."""
    if previous is not None and previous_until is not None and now < previous_until:
        return [current, previous]
    return [current]


def verify(
    signing_secrets: Sequence[str],
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: int,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> None:
    """Raise WebhookSignatureError unless a `v1` entry matches one secret and the timestamp is fresh.

    Header names match case-insensitively; entries of other versions (`v1a`) and malformed
    entries are skipped, as the spec lets a receiver try each signature until one matches.
    """
    _require_secret_list(signing_secrets)
    lowered = {name.lower(): value for name, value in headers.items()}
    message_id = lowered.get(ID_HEADER, "")
    timestamp_text = lowered.get(TIMESTAMP_HEADER, "")
    listed = lowered.get(SIGNATURE_HEADER, "")
    if not (_MESSAGE_ID.fullmatch(message_id) and _TIMESTAMP.fullmatch(timestamp_text) and listed):
        raise WebhookSignatureError("missing or malformed webhook headers")
    timestamp = int(timestamp_text)
    if abs(now - timestamp) > tolerance_seconds:
        raise WebhookSignatureError("webhook timestamp outside the tolerance")
    candidates = [signature for entry in listed.split() if (signature := _v1_signature(entry)) is not None]
    for secret in signing_secrets:
        expected = _digest(secret_key(secret), message_id, timestamp, body)
        if any(hmac.compare_digest(expected, candidate) for candidate in candidates):
            return
    raise WebhookSignatureError("no webhook signature matches")


def _digest(key: bytes, message_id: str, timestamp: int, body: bytes) -> bytes:
    if not _MESSAGE_ID.fullmatch(message_id):
        raise ValueError("a webhook id is 1 to 256 visible ASCII characters")
    if isinstance(timestamp, bool) or timestamp < 0:
        raise ValueError("a webhook timestamp is a non-negative number of seconds")
    return hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()


def _v1_signature(entry: str) -> bytes | None:
    version, comma, encoded = entry.partition(",")
    if version != _VERSION or not comma:
        return None
    try:
        return base64.b64decode(encoded, validate=True)
    except binascii.Error:
        return None


def _require_secret_list(signing_secrets: Sequence[str]) -> None:
    # A bare string is a Sequence[str] too: signing with each of its characters would be a bug.
    if isinstance(signing_secrets, str) or not signing_secrets:
        raise ValueError("pass a non-empty list of signing secrets")
