"""List cursors: opaque, tamper-proof, and bound to the caller and the status filter."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.cursor import MAX_CURSOR_CHARS, CursorCodec, ListPosition
from shared.errors import InvalidCursorError
from shared.job import Caller

SECRET = b"0123456789abcdef0123456789abcdef"
ALICE = Caller(tenant="acme", sub="alice")
POSITION = ListPosition(
    list_key="2030-01-15T12:00:30.250Z#01945f7e-8f7a-7abc-8def-0123456789ab",
    job_id="6f1d2c3b-4a59-4e8d-9c7b-6a5f4e3d2c1b",
)


@pytest.fixture
def codec() -> CursorCodec:
    return CursorCodec(SECRET)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_a_cursor_round_trips(codec: CursorCodec) -> None:
    cursor = codec.encode(ALICE, None, POSITION)

    assert codec.decode(ALICE, None, cursor) == POSITION


def test_a_cursor_round_trips_with_a_status_filter(codec: CursorCodec) -> None:
    cursor = codec.encode(ALICE, "Running", POSITION)

    assert codec.decode(ALICE, "Running", cursor) == POSITION


def test_a_cursor_is_url_safe_and_short(codec: CursorCodec) -> None:
    cursor = codec.encode(ALICE, "CancellationRequested", POSITION)

    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
    assert len(cursor) <= MAX_CURSOR_CHARS


@settings(max_examples=50, deadline=None)
@given(list_key=st.text(min_size=1, max_size=80), job_id=st.text(min_size=1, max_size=40))
def test_any_position_round_trips(list_key: str, job_id: str) -> None:
    codec = CursorCodec(SECRET)
    position = ListPosition(list_key=list_key, job_id=job_id)

    assert codec.decode(ALICE, None, codec.encode(ALICE, None, position)) == position


@pytest.mark.parametrize(
    "other",
    [
        Caller(tenant="acme", sub="bob"),
        Caller(tenant="globex", sub="alice"),
        Caller(tenant="user:alice", sub="alice"),
    ],
    ids=["other sub", "same sub other tenant", "same sub personal tenant"],
)
def test_a_cursor_issued_to_one_caller_is_refused_for_another(codec: CursorCodec, other: Caller) -> None:
    cursor = codec.encode(ALICE, None, POSITION)

    with pytest.raises(InvalidCursorError):
        codec.decode(other, None, cursor)


@pytest.mark.parametrize(
    ("issued_for", "used_with"),
    [("Running", "Pending"), ("Running", None), (None, "Running"), ("Running", "running")],
    ids=["other filter", "filter dropped", "filter added", "case changed"],
)
def test_a_cursor_is_bound_to_its_status_filter(
    codec: CursorCodec, issued_for: str | None, used_with: str | None
) -> None:
    cursor = codec.encode(ALICE, issued_for, POSITION)

    with pytest.raises(InvalidCursorError):
        codec.decode(ALICE, used_with, cursor)


def test_a_cursor_signed_with_another_secret_is_refused(codec: CursorCodec) -> None:
    rotated = CursorCodec(b"another secret of enough bytes!!")

    with pytest.raises(InvalidCursorError):
        codec.decode(ALICE, None, rotated.encode(ALICE, None, POSITION))


def test_a_forged_position_under_the_old_mac_is_refused(codec: CursorCodec) -> None:
    # Given a genuine cursor
    payload, mac = codec.encode(ALICE, None, POSITION).split(".")
    # When the client swaps in another position but keeps the MAC
    forged = json.loads(unb64(payload))
    forged["j"] = "00000000-0000-4000-8000-000000000000"
    tampered = f"{b64(json.dumps(forged, separators=(',', ':')).encode())}.{mac}"

    # Then
    with pytest.raises(InvalidCursorError):
        codec.decode(ALICE, None, tampered)


def test_a_tampered_mac_is_refused(codec: CursorCodec) -> None:
    payload, mac = codec.encode(ALICE, None, POSITION).split(".")
    raw = bytearray(unb64(mac))
    raw[0] ^= 0x01

    with pytest.raises(InvalidCursorError):
        codec.decode(ALICE, None, f"{payload}.{b64(bytes(raw))}")


def test_a_truncated_mac_is_refused(codec: CursorCodec) -> None:
    payload, mac = codec.encode(ALICE, None, POSITION).split(".")

    with pytest.raises(InvalidCursorError):
        codec.decode(ALICE, None, f"{payload}.{mac[:-4]}")


def test_a_cursor_of_another_version_is_refused_even_when_signed(codec: CursorCodec) -> None:
    # Signed with the codec's own key, so only the version check can refuse it.
    payload = json.dumps({"v": 2, "k": POSITION.list_key, "j": POSITION.job_id}).encode()
    signed = f"{b64(payload)}.{b64(codec._mac(ALICE, None, payload))}"

    with pytest.raises(InvalidCursorError):
        codec.decode(ALICE, None, signed)


@pytest.mark.parametrize(
    "payload", [b"not json", b"[]", b'{"v": 1, "k": "x"}', b'{"v":1,"k":"x","j":"y","z":0}']
)
def test_a_signed_payload_of_the_wrong_shape_is_refused(codec: CursorCodec, payload: bytes) -> None:
    signed = f"{b64(payload)}.{b64(codec._mac(ALICE, None, payload))}"

    with pytest.raises(InvalidCursorError):
        codec.decode(ALICE, None, signed)


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        ".",
        "..",
        "a.b.c",
        "abc",
        "!!!.???",
        "a.b",
        "é.é",
        "\x00.\x00",
        "x" * 5000,
        "a" * 600 + "." + "b" * 600,
    ],
    ids=[
        "empty",
        "dot",
        "two dots",
        "three parts",
        "no dot",
        "non-base64",
        "one-char parts",
        "non-ascii",
        "nul",
        "very long",
        "over the limit",
    ],
)
def test_garbage_is_an_invalid_cursor(codec: CursorCodec, garbage: str) -> None:
    with pytest.raises(InvalidCursorError):
        codec.decode(ALICE, None, garbage)


def test_the_error_detail_says_nothing_about_why(codec: CursorCodec) -> None:
    with pytest.raises(InvalidCursorError) as caught:
        codec.decode(Caller(tenant="acme", sub="bob"), None, codec.encode(ALICE, None, POSITION))

    assert caught.value.detail == "The cursor is not valid for this request."


def test_a_secret_shorter_than_16_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        CursorCodec(b"x" * 15)


def test_a_secret_of_16_bytes_is_enough() -> None:
    codec = CursorCodec(b"x" * 16)

    assert codec.decode(ALICE, None, codec.encode(ALICE, None, POSITION)) == POSITION
