"""Standard Webhooks v1 signing: checked against the spec's algorithm and the reference test vector."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.errors import WebhookSignatureError
from shared.lifecycle import JobStatus
from shared.webhooks import signing
from shared.webhooks.events import EventType, event_id, event_type_for

# The test vector every Standard Webhooks reference library checks its signer against.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

JOB_ID = "6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b"
MESSAGE_ID = f"{JOB_ID}.0.job.succeeded"
NOW = 1_900_000_000
BODY = b'{"type":"job.succeeded","timestamp":"2030-03-17T17:46:40.000Z","data":{"jobId":"x"}}'
OLD = "whsec_" + base64.b64encode(bytes(range(32))).decode()
NEW = "whsec_" + base64.b64encode(bytes(range(100, 132))).decode()


def spec_signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The spec's computation, written out: base64(HMAC-SHA256(decoded secret, "id.ts.body"))."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    content = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()


def headers_for(signature: str, message_id: str = MESSAGE_ID, timestamp: int = NOW) -> dict[str, str]:
    return {"webhook-id": message_id, "webhook-timestamp": str(timestamp), "webhook-signature": signature}


class TestSigning:
    def test_the_reference_test_vector(self) -> None:
        assert signing.sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE

    def test_the_signature_is_the_spec_computation(self) -> None:
        assert signing.sign(NEW, MESSAGE_ID, NOW, BODY) == spec_signature(NEW, MESSAGE_ID, NOW, BODY)

    def test_the_spec_computation_reproduces_the_vector(self) -> None:
        # So that spec_signature, which the other tests trust, is itself checked.
        assert spec_signature(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE

    def test_two_secrets_give_two_entries_in_order_each_the_spec_computation(self) -> None:
        header = signing.signature_header([NEW, OLD], MESSAGE_ID, NOW, BODY)

        assert header.split(" ") == [
            spec_signature(NEW, MESSAGE_ID, NOW, BODY),
            spec_signature(OLD, MESSAGE_ID, NOW, BODY),
        ]

    def test_signed_headers_are_the_three_standard_headers(self) -> None:
        headers = signing.signed_headers([NEW], MESSAGE_ID, NOW, BODY)

        assert headers == {
            "webhook-id": MESSAGE_ID,
            "webhook-timestamp": str(NOW),
            "webhook-signature": spec_signature(NEW, MESSAGE_ID, NOW, BODY),
        }

    def test_each_part_of_the_signed_content_changes_the_signature(self) -> None:
        base = signing.sign(NEW, MESSAGE_ID, NOW, BODY)

        assert signing.sign(OLD, MESSAGE_ID, NOW, BODY) != base
        assert signing.sign(NEW, f"{JOB_ID}.1.job.succeeded", NOW, BODY) != base
        assert signing.sign(NEW, MESSAGE_ID, NOW + 1, BODY) != base
        assert signing.sign(NEW, MESSAGE_ID, NOW, BODY + b" ") != base

    @pytest.mark.parametrize("message_id", ["", "has space", "tab\there", "new\nline", "é", "x" * 257])
    def test_a_message_id_that_is_not_visible_ascii_is_refused(self, message_id: str) -> None:
        with pytest.raises(ValueError, match="webhook id"):
            signing.sign(NEW, message_id, NOW, BODY)

    @pytest.mark.parametrize("timestamp", [-1, True])
    def test_a_timestamp_is_a_non_negative_integer(self, timestamp: int) -> None:
        with pytest.raises(ValueError, match="timestamp"):
            signing.sign(NEW, MESSAGE_ID, timestamp, BODY)

    @pytest.mark.parametrize("secrets", ["whsec_abc", [], ()])
    def test_signing_needs_a_list_of_secrets(self, secrets: list[str]) -> None:
        with pytest.raises(ValueError, match="list of signing secrets"):
            signing.signature_header(secrets, MESSAGE_ID, NOW, BODY)


class TestSecrets:
    def test_a_new_secret_is_whsec_and_base64_of_32_random_bytes(self) -> None:
        secret = signing.generate_secret()

        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
        assert signing.generate_secret() != secret

    def test_the_hmac_key_is_the_decoded_bytes(self) -> None:
        assert signing.secret_key(OLD) == bytes(range(32))

    def test_padding_may_be_left_out(self) -> None:
        assert signing.secret_key(OLD.rstrip("=")) == bytes(range(32))

    def test_the_reference_vector_secret_is_24_bytes_the_spec_minimum(self) -> None:
        assert len(signing.secret_key(VECTOR_SECRET)) == 24

    @pytest.mark.parametrize(
        ("secret", "message"),
        [
            (base64.b64encode(bytes(32)).decode(), "starts with whsec_"),
            ("whsec_not*base64!", "base64"),
            ("whsec_" + base64.b64encode(bytes(23)).decode(), "24 to 64 bytes"),
            ("whsec_" + base64.b64encode(bytes(65)).decode(), "24 to 64 bytes"),
            ("whsec_", "24 to 64 bytes"),
        ],
    )
    def test_a_malformed_secret_is_refused_without_echoing_it(self, secret: str, message: str) -> None:
        with pytest.raises(ValueError, match=message) as raised:
            signing.secret_key(secret)

        assert secret not in str(raised.value)

    def test_during_the_overlap_both_secrets_sign_current_first(self) -> None:
        until = NOW + signing.ROTATION_OVERLAP_SECONDS

        assert signing.signing_secrets(NEW, OLD, until, NOW) == [NEW, OLD]
        assert signing.signing_secrets(NEW, OLD, until, until - 1) == [NEW, OLD]

    def test_after_the_overlap_only_the_current_secret_signs(self) -> None:
        until = NOW + signing.ROTATION_OVERLAP_SECONDS

        assert signing.signing_secrets(NEW, OLD, until, until) == [NEW]
        assert signing.signing_secrets(NEW, None, None, NOW) == [NEW]

    def test_the_overlap_is_24_hours(self) -> None:
        assert signing.ROTATION_OVERLAP_SECONDS == 24 * 3600


class TestVerification:
    def test_a_signature_made_by_the_spec_computation_verifies(self) -> None:
        signing.verify([NEW], headers_for(spec_signature(NEW, MESSAGE_ID, NOW, BODY)), BODY, now=NOW)

    def test_the_reference_vector_verifies(self) -> None:
        headers = headers_for(VECTOR_SIGNATURE, VECTOR_ID, VECTOR_TIMESTAMP)

        signing.verify([VECTOR_SECRET], headers, VECTOR_BODY, now=VECTOR_TIMESTAMP)

    def test_header_names_match_in_any_case(self) -> None:
        headers = {
            name.title(): value
            for name, value in signing.signed_headers([NEW], MESSAGE_ID, NOW, BODY).items()
        }

        signing.verify([NEW], headers, BODY, now=NOW)

    @pytest.mark.parametrize("receiver_secret", [OLD, NEW])
    def test_during_rotation_a_receiver_with_either_secret_verifies(self, receiver_secret: str) -> None:
        headers = signing.signed_headers([NEW, OLD], MESSAGE_ID, NOW, BODY)

        signing.verify([receiver_secret], headers, BODY, now=NOW)

    def test_a_receiver_holding_both_secrets_verifies_a_single_signature(self) -> None:
        headers = signing.signed_headers([OLD], MESSAGE_ID, NOW, BODY)

        signing.verify([NEW, OLD], headers, BODY, now=NOW)

    def test_another_secret_does_not_verify(self) -> None:
        headers = signing.signed_headers([OLD], MESSAGE_ID, NOW, BODY)

        with pytest.raises(WebhookSignatureError, match="no webhook signature matches"):
            signing.verify([NEW], headers, BODY, now=NOW)

    @pytest.mark.parametrize(
        "tamper",
        [
            lambda h, b: ({**h, "webhook-id": f"{JOB_ID}.1.job.succeeded"}, b),
            lambda h, b: ({**h, "webhook-timestamp": str(NOW + 1)}, b),
            lambda h, b: (h, b.replace(b"succeeded", b"failed")),
            lambda h, b: (h, b + b"\n"),
        ],
        ids=["id", "timestamp", "body", "trailing-newline"],
    )
    def test_any_change_to_id_timestamp_or_body_fails(self, tamper) -> None:
        headers, body = tamper(signing.signed_headers([NEW], MESSAGE_ID, NOW, BODY), BODY)

        with pytest.raises(WebhookSignatureError, match="no webhook signature matches"):
            signing.verify([NEW], headers, body, now=NOW)

    @pytest.mark.parametrize("offset", [-300, 300, 0])
    def test_a_timestamp_within_five_minutes_either_way_verifies(self, offset: int) -> None:
        headers = signing.signed_headers([NEW], MESSAGE_ID, NOW + offset, BODY)

        signing.verify([NEW], headers, BODY, now=NOW)

    @pytest.mark.parametrize("offset", [-301, 301, -86400])
    def test_a_timestamp_outside_the_tolerance_fails_even_when_signed(self, offset: int) -> None:
        headers = signing.signed_headers([NEW], MESSAGE_ID, NOW + offset, BODY)

        with pytest.raises(WebhookSignatureError, match="tolerance"):
            signing.verify([NEW], headers, BODY, now=NOW)

    def test_the_tolerance_is_a_parameter(self) -> None:
        headers = signing.signed_headers([NEW], MESSAGE_ID, NOW - 60, BODY)

        signing.verify([NEW], headers, BODY, now=NOW, tolerance_seconds=60)
        with pytest.raises(WebhookSignatureError, match="tolerance"):
            signing.verify([NEW], headers, BODY, now=NOW, tolerance_seconds=59)

    @pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
    def test_a_missing_header_fails(self, missing: str) -> None:
        headers = signing.signed_headers([NEW], MESSAGE_ID, NOW, BODY)
        del headers[missing]

        with pytest.raises(WebhookSignatureError, match="missing or malformed"):
            signing.verify([NEW], headers, BODY, now=NOW)

    @pytest.mark.parametrize(
        "timestamp", ["", "1.5e9", "-1900000000", " 1900000000", "1900000000.0", "abc", "١٩"]
    )
    def test_a_timestamp_that_is_not_integer_seconds_fails(self, timestamp: str) -> None:
        headers = {**signing.signed_headers([NEW], MESSAGE_ID, NOW, BODY), "webhook-timestamp": timestamp}

        with pytest.raises(WebhookSignatureError, match="missing or malformed"):
            signing.verify([NEW], headers, BODY, now=NOW)

    def test_malformed_and_foreign_entries_are_skipped_until_one_matches(self) -> None:
        good = signing.sign(NEW, MESSAGE_ID, NOW, BODY)
        entries = ["garbage", "v1", "v1,", "v1,!!not-base64!!", "v1a,aGVsbG8=", "v2," + good[3:], good]

        signing.verify([NEW], headers_for("  ".join(entries)), BODY, now=NOW)

    def test_only_a_v1_entry_counts(self) -> None:
        good = signing.sign(NEW, MESSAGE_ID, NOW, BODY)

        with pytest.raises(WebhookSignatureError, match="no webhook signature matches"):
            signing.verify([NEW], headers_for("v1a," + good[3:]), BODY, now=NOW)

    def test_a_bare_string_of_secrets_is_a_bug_not_a_check(self) -> None:
        with pytest.raises(ValueError, match="list of signing secrets"):
            signing.verify(NEW, signing.signed_headers([NEW], MESSAGE_ID, NOW, BODY), BODY, now=NOW)

    @settings(max_examples=200, deadline=None)
    @given(
        body=st.binary(max_size=512),
        message_id=st.text(
            alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=64
        ),
        timestamp=st.integers(min_value=0, max_value=10**11),
        flip=st.integers(min_value=0),
    )
    def test_what_is_signed_verifies_and_a_flipped_body_bit_does_not(
        self, body: bytes, message_id: str, timestamp: int, flip: int
    ) -> None:
        headers = signing.signed_headers([NEW], message_id, timestamp, body)

        signing.verify([NEW], headers, body, now=timestamp)
        if body:
            position = flip % (len(body) * 8)
            changed = bytearray(body)
            changed[position // 8] ^= 1 << (position % 8)
            with pytest.raises(WebhookSignatureError):
                signing.verify([NEW], headers, bytes(changed), now=timestamp)


class TestEventIds:
    def test_the_id_is_job_redrive_count_and_type(self) -> None:
        assert event_id(JOB_ID, 0, EventType.JOB_SUCCEEDED) == f"{JOB_ID}.0.job.succeeded"
        assert event_id(JOB_ID, 2, EventType.JOB_CANCELED) == f"{JOB_ID}.2.job.canceled"

    def test_every_attempt_of_a_delivery_gets_the_same_id_and_a_redrive_a_new_one(self) -> None:
        first = event_id(JOB_ID, 0, EventType.JOB_FAILED)

        assert event_id(JOB_ID, 0, EventType.JOB_FAILED) == first
        assert event_id(JOB_ID, 1, EventType.JOB_FAILED) != first

    @pytest.mark.parametrize("job_id", ["", "job.1", JOB_ID.upper(), f"{JOB_ID}.0", "not-a-uuid"])
    def test_the_job_id_is_a_lowercase_uuid(self, job_id: str) -> None:
        with pytest.raises(ValueError, match="lowercase UUID"):
            event_id(job_id, 0, EventType.JOB_SUCCEEDED)

    @pytest.mark.parametrize("count", [-1, True])
    def test_the_redrive_count_is_a_non_negative_integer(self, count: int) -> None:
        with pytest.raises(ValueError, match="redrive count"):
            event_id(JOB_ID, count, EventType.JOB_SUCCEEDED)

    def test_an_unknown_type_is_refused(self) -> None:
        with pytest.raises(ValueError, match=r"job\.started"):
            event_id(JOB_ID, 0, "job.started")  # type: ignore[arg-type]

    def test_an_event_id_is_a_valid_webhook_id(self) -> None:
        message_id = event_id(JOB_ID, 3, EventType.JOB_SUCCEEDED)

        signing.verify([NEW], signing.signed_headers([NEW], message_id, NOW, BODY), BODY, now=NOW)

    @pytest.mark.parametrize(
        ("status", "expected"),
        [
            (JobStatus.SUCCEEDED, EventType.JOB_SUCCEEDED),
            (JobStatus.FAILED, EventType.JOB_FAILED),
            (JobStatus.CANCELED, EventType.JOB_CANCELED),
            (JobStatus.PENDING, None),
            (JobStatus.RUNNING, None),
            (JobStatus.CANCELLATION_REQUESTED, None),
        ],
    )
    def test_only_terminal_statuses_raise_events(self, status: JobStatus, expected: EventType | None) -> None:
        assert event_type_for(status) is expected
