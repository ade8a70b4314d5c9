"""An S3 POST policy, checked as S3 checks a browser-based upload (SigV4): pure, no I/O.

moto stores a form POST whatever its policy says (measured: DESIGN.md, "Documents"), so local
mode's upload front checks it first with this module, then hands the request to moto unchanged.
What S3 checks, in its order (AWS S3 API reference, "Browser-based uploads using POST"):
- the form carries a policy, its signature and the SigV4 fields; the signature is the HMAC of the
  base64 policy under the key derived from the signer's secret, date, region and service, and
  the credential's scope names this region and `s3` (`SignatureDoesNotMatch` otherwise);
- the policy has not expired (`AccessDenied`, "Invalid according to Policy: Policy expired.");
- every form field but `file`, `policy`, `x-amz-signature` and `x-ignore-*` is named by a
  condition, and every condition holds for the form (`AccessDenied`, "Invalid according to
  Policy: ..."): exact matches (`{"key": ...}` or `["eq", "$key", ...]`), `starts-with`, and the
  bucket the form was posted to;
- the file's size is within `content-length-range` (`EntityTooSmall`, `EntityTooLarge`).
Who may then write the object (the signer's role) is the caller's to check: this module names
the signer's access key id.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# Form fields no condition needs to name (S3: "except x-amz-signature, file, policy, and field
# names that have an x-ignore- prefix").
_UNCONDITIONED = frozenset({"file", "policy", "x-amz-signature"})
_ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True)
class PostRefusal(Exception):  # noqa: N818 - S3's own error names say what it is
    """S3's answer to a POST it refuses: the HTTP status, the error code and its message."""

    status: int
    code: str
    message: str


@dataclass(frozen=True)
class AcceptedPost:
    """A POST whose policy holds: who signed it (their access key id), where it writes."""

    access_key_id: str
    bucket: str
    key: str


SecretOf = Callable[[str], str | None]


def check_post(
    bucket: str,
    fields: Mapping[str, str],
    file_size: int,
    *,
    now: datetime,
    region: str,
    secret_of: SecretOf,
) -> AcceptedPost:
    """The POST as S3 would take it, or PostRefusal. `fields` are the form's fields but the file
    (names as sent), `secret_of` gives a known access key id's secret (None: unknown key)."""
    lowered = {name.lower(): value for name, value in fields.items()}
    policy_b64 = lowered.get("policy")
    if not policy_b64:
        raise PostRefusal(403, "AccessDenied", "Bucket POST must contain a field named 'policy'.")
    access_key_id = _verify_signature(lowered, policy_b64, region, secret_of)
    policy = _parse(policy_b64)
    if now >= _expiration(policy):
        raise PostRefusal(403, "AccessDenied", "Invalid according to Policy: Policy expired.")
    length_range = _check_conditions(policy, {**lowered, "bucket": bucket})
    if length_range is not None:
        _check_length(file_size, *length_range)
    key = lowered.get("key")
    if not key:
        raise PostRefusal(400, "InvalidArgument", "Bucket POST must contain a field named 'key'.")
    return AcceptedPost(access_key_id=access_key_id, bucket=bucket, key=key)


def _check_conditions(policy: Mapping[str, Any], form: Mapping[str, str]) -> tuple[int, int] | None:
    """Every condition holds and every field is named by one; the content-length-range, if any."""
    conditions = policy.get("conditions")
    if not isinstance(conditions, list):
        raise _invalid_policy("conditions must be a list")
    named: set[str] = set()
    length_range: tuple[int, int] | None = None
    for condition in conditions:
        if isinstance(condition, list) and condition and str(condition[0]).lower() == "content-length-range":
            length_range = _length_range(condition)
            continue
        name, holds = _condition(condition, form)
        named.add(name)
        if not holds:
            raise PostRefusal(
                403,
                "AccessDenied",
                f"Invalid according to Policy: Policy Condition failed: {json.dumps(condition)}",
            )
    extra = [
        name
        for name in form
        if name not in _UNCONDITIONED and name != "bucket" and not name.startswith("x-ignore-")
        if name not in named
    ]
    if extra:
        raise PostRefusal(403, "AccessDenied", f"Invalid according to Policy: Extra input fields: {extra[0]}")
    return length_range


def _check_length(file_size: int, low: int, high: int) -> None:
    if file_size < low:
        raise PostRefusal(
            400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size"
        )
    if file_size > high:
        raise PostRefusal(400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size")


def signing_key(secret: str, date: str, region: str, service: str = "s3") -> bytes:
    """SigV4's derived key: HMAC chain over the date, region, service and `aws4_request`."""
    key = _hmac(f"AWS4{secret}".encode(), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def post_signature(secret: str, date: str, region: str, policy_b64: str) -> str:
    """The x-amz-signature of a POST policy."""
    return hmac.new(signing_key(secret, date, region), policy_b64.encode(), hashlib.sha256).hexdigest()


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def _verify_signature(fields: Mapping[str, str], policy_b64: str, region: str, secret_of: SecretOf) -> str:
    mismatch = PostRefusal(
        403,
        "SignatureDoesNotMatch",
        "The request signature we calculated does not match the signature you provided.",
    )
    if fields.get("x-amz-algorithm") != _ALGORITHM:
        raise PostRefusal(400, "InvalidArgument", "x-amz-algorithm must be AWS4-HMAC-SHA256.")
    credential, signature = fields.get("x-amz-credential", ""), fields.get("x-amz-signature", "")
    parts = credential.split("/")
    if len(parts) != 5 or parts[2:] != [region, "s3", "aws4_request"] or not signature:
        raise mismatch
    access_key_id, date = parts[0], parts[1]
    secret = secret_of(access_key_id)
    if secret is None:
        raise PostRefusal(403, "InvalidAccessKeyId", "The AWS access key Id you provided does not exist.")
    if not hmac.compare_digest(post_signature(secret, date, region, policy_b64), signature):
        raise mismatch
    return access_key_id


def _parse(policy_b64: str) -> dict[str, Any]:
    try:
        policy = json.loads(base64.b64decode(policy_b64, validate=True))
    except (binascii.Error, ValueError):
        raise _invalid_policy("the policy is not base64-encoded JSON") from None
    if not isinstance(policy, dict):
        raise _invalid_policy("the policy is not a JSON object")
    return policy


def _expiration(policy: Mapping[str, Any]) -> datetime:
    text = policy.get("expiration")
    if not isinstance(text, str):
        raise _invalid_policy("the policy has no expiration")
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise _invalid_policy("the expiration is not an ISO 8601 time") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _length_range(condition: list[Any]) -> tuple[int, int]:
    if len(condition) != 3 or not all(isinstance(v, int) and not isinstance(v, bool) for v in condition[1:]):
        raise _invalid_policy("content-length-range takes two integers")
    return int(condition[1]), int(condition[2])


def _condition(condition: Any, fields: Mapping[str, str]) -> tuple[str, bool]:
    """The field a condition names (lowercase) and whether the form meets it."""
    if isinstance(condition, dict) and len(condition) == 1:
        ((name, expected),) = condition.items()
        name = str(name).lower()
        return name, fields.get(name) == str(expected)
    if isinstance(condition, list) and len(condition) == 3:
        operator, target, expected = (str(part) for part in condition)
        if not target.startswith("$"):
            raise _invalid_policy(f"a condition's field must start with $: {target}")
        name = target[1:].lower()
        value = fields.get(name)
        if operator.lower() == "eq":
            return name, value == expected
        if operator.lower() == "starts-with":
            return name, value is not None and value.startswith(expected)
    raise _invalid_policy(f"unknown condition {json.dumps(condition)}")


def _invalid_policy(why: str) -> PostRefusal:
    return PostRefusal(400, "InvalidPolicyDocument", f"Invalid Policy: {why}.")
