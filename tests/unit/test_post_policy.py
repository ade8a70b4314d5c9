"""The POST policy check of local mode's upload front, on forms boto3 signs: what S3 accepts and
refuses (signature, expiry, key, type, size, extra fields), table-driven."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from outlast.local.post_policy import PostRefusal, check_post
from tests.support.uploads import ACCESS_KEY, BUCKET, KEY, REGION, SECRET, SIZE, signed_form


def _secret_of(access_key_id: str) -> str | None:
    return SECRET if access_key_id == ACCESS_KEY else None


def _check(
    fields: dict[str, str], size: int = SIZE, bucket: str = BUCKET, now: datetime | None = None
) -> Any:
    return check_post(bucket, fields, size, now=now or datetime.now(UTC), region=REGION, secret_of=_secret_of)


def test_the_form_as_signed_is_accepted_and_names_its_signer() -> None:
    accepted = _check(signed_form())

    assert (accepted.access_key_id, accepted.bucket, accepted.key) == (ACCESS_KEY, BUCKET, KEY)


@pytest.mark.parametrize(
    ("change", "status", "code"),
    [
        ({"key": KEY.replace("alice", "mallory")}, 403, "AccessDenied"),
        ({"Content-Type": "text/plain"}, 403, "AccessDenied"),
        ({"x-amz-signature": "0" * 64}, 403, "SignatureDoesNotMatch"),
        (
            {"x-amz-credential": "ASIALOCALSIGNER00/20300101/eu-west-1/s3/aws4_request"},
            403,
            "SignatureDoesNotMatch",
        ),
        ({"acl": "public-read"}, 403, "AccessDenied"),  # a field no condition names
        ({"policy": ""}, 403, "AccessDenied"),
        ({"policy": "bm90IGpzb24="}, 403, "SignatureDoesNotMatch"),  # another policy than the signed one
    ],
)
def test_a_changed_form_is_refused(change: dict[str, str], status: int, code: str) -> None:
    with pytest.raises(PostRefusal) as refused:
        _check(signed_form() | change)

    assert (refused.value.status, refused.value.code) == (status, code)


def test_an_unknown_signer_is_refused() -> None:
    with pytest.raises(PostRefusal) as refused:
        _check(signed_form(access_key="ASIAUNKNOWNSIGNER"))

    assert refused.value.code == "InvalidAccessKeyId"


@pytest.mark.parametrize(("size", "code"), [(0, "EntityTooSmall"), (SIZE + 1, "EntityTooLarge")])
def test_a_file_outside_the_length_range_is_refused(size: int, code: str) -> None:
    with pytest.raises(PostRefusal) as refused:
        _check(signed_form(), size=size)

    assert (refused.value.status, refused.value.code) == (400, code)


def test_an_expired_policy_is_refused() -> None:
    with pytest.raises(PostRefusal) as refused:
        _check(signed_form(expires_in=60), now=datetime.now(UTC) + timedelta(minutes=2))

    assert "expired" in refused.value.message


def test_another_bucket_than_the_policys_is_refused() -> None:
    with pytest.raises(PostRefusal) as refused:
        _check(signed_form(), bucket="another-bucket")

    assert refused.value.code == "AccessDenied"


def test_ignored_fields_need_no_condition() -> None:
    assert _check(signed_form() | {"x-ignore-note": "anything"}).key == KEY
