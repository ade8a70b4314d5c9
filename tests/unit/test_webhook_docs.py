"""The verifier in docs/webhooks.md runs, and accepts exactly what shared.webhooks.signing signs."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from shared.adapters.dynamo_items import job_to_item
from shared.adapters.job_stream import job_change
from shared.lifecycle import JobStatus
from shared.webhooks import signing
from shared.webhooks.deliveries import event_body
from shared.webhooks.events import EventType
from tests.fakes import job_record

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
MARKER = "<!-- verifier (tests/unit/test_webhook_docs.py runs this block) -->"
SECRET = signing.generate_secret()
OTHER = signing.generate_secret()
MESSAGE_ID = "6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b.0.job.succeeded"
BODY = b'{"type":"job.succeeded","timestamp":"2030-03-17T17:46:40.123Z","data":{"jobId":"6f1d2c3b"}}'

Verifier = Callable[..., bool]


def snippet() -> str:
    match = re.search(
        re.escape(MARKER) + r"\s*```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL
    )
    assert match, f"{DOC.name} lost its verifier block (or the marker above it)"
    return match.group(1)


@pytest.fixture(scope="module")
def verify_webhook() -> Verifier:
    namespace: dict[str, Any] = {}
    exec(compile(snippet(), str(DOC), "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace["verify_webhook"]  # type: ignore[no-any-return]


def headers(secrets: list[str], timestamp: int | None = None) -> dict[str, str]:
    now = int(time.time()) if timestamp is None else timestamp
    return signing.signed_headers(secrets, MESSAGE_ID, now, BODY)


def test_the_snippet_uses_only_the_standard_library() -> None:
    imported = re.findall(r"^(?:import|from) (\w+)", snippet(), re.MULTILINE)

    assert set(imported) <= {"base64", "hashlib", "hmac", "time"}


def test_a_call_signed_by_outlast_verifies(verify_webhook: Verifier) -> None:
    assert verify_webhook(SECRET, headers([SECRET]), BODY) is True


def test_header_names_in_any_case_verify(verify_webhook: Verifier) -> None:
    titled = {name.title(): value for name, value in headers([SECRET]).items()}

    assert verify_webhook(SECRET, titled, BODY) is True


@pytest.mark.parametrize("receiver_secret", [SECRET, OTHER], ids=["current", "previous"])
def test_during_rotation_either_secret_verifies(verify_webhook: Verifier, receiver_secret: str) -> None:
    assert verify_webhook(receiver_secret, headers([OTHER, SECRET]), BODY) is True


def test_another_secret_does_not_verify(verify_webhook: Verifier) -> None:
    assert verify_webhook(OTHER, headers([SECRET]), BODY) is False


def test_a_changed_body_does_not_verify(verify_webhook: Verifier) -> None:
    assert verify_webhook(SECRET, headers([SECRET]), BODY.replace(b"succeeded", b"failed")) is False


@pytest.mark.parametrize("field", ["webhook-id", "webhook-timestamp"])
def test_a_changed_id_or_timestamp_does_not_verify(verify_webhook: Verifier, field: str) -> None:
    changed = headers([SECRET])
    changed[field] = (
        changed[field].replace("0", "1", 1) if field == "webhook-id" else str(int(changed[field]) - 1)
    )

    assert verify_webhook(SECRET, changed, BODY) is False


def test_a_replayed_call_older_than_five_minutes_does_not_verify(verify_webhook: Verifier) -> None:
    assert verify_webhook(SECRET, headers([SECRET], int(time.time()) - 3600), BODY) is False


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_does_not_verify(verify_webhook: Verifier, missing: str) -> None:
    incomplete = headers([SECRET])
    del incomplete[missing]

    assert verify_webhook(SECRET, incomplete, BODY) is False


@pytest.mark.parametrize("timestamp", ["", "abc", "1.5", "-5", "١٩٠٠"])
def test_a_timestamp_that_is_not_integer_seconds_does_not_verify(
    verify_webhook: Verifier, timestamp: str
) -> None:
    odd = {**headers([SECRET]), "webhook-timestamp": timestamp}

    assert verify_webhook(SECRET, odd, BODY) is False


def test_a_non_ascii_signature_header_is_refused_not_an_error(verify_webhook: Verifier) -> None:
    odd = {**headers([SECRET]), "webhook-signature": "v1,é"}

    assert verify_webhook(SECRET, odd, BODY) is False


def test_the_body_example_has_the_fields_a_real_body_has() -> None:
    marker = "<!-- body example (tests/unit/test_webhook_docs.py checks its fields against a real body) -->"
    match = re.search(re.escape(marker) + r"\s*```json\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert match, "the body example (or the marker above it) is gone"
    example = json.loads(match.group(1))
    job = job_record(datetime(2030, 3, 17, tzinfo=UTC), status=JobStatus.SUCCEEDED)
    image = {**job_to_item(job, sweep_at=None), "w": {"S": "terminal"}}
    change = job_change({"eventName": "MODIFY", "dynamodb": {"SequenceNumber": "1", "NewImage": image}})
    assert change is not None
    real = json.loads(event_body(change, EventType.JOB_SUCCEEDED))

    assert list(example) == list(real)
    assert list(example["data"]) == list(real["data"])
    assert set(example["data"]["owner"]) == set(real["data"]["owner"])
