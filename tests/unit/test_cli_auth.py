"""The sign-in's pure parts: PKCE, the owner-only credentials file, ID token expiry, profiles."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from outlast.auth.pkce import challenge_of, new_state, new_verifier
from outlast.auth.profiles import Profile, ProfileError, from_outputs_file, load_profile, save_profile
from outlast.auth.store import Credentials, CredentialsError, FileStore
from outlast.auth.tokens import expires_at

pytestmark = pytest.mark.unit

CREDENTIALS = Credentials("id.token.x", "refresh-1", "https://auth.example", "client-1")


def jwt_with(claims: dict[str, object]) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"e30.{payload}.c2ln"


def test_the_s256_challenge_is_rfc_7636s():
    # RFC 7636, appendix B
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert challenge_of(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"


def test_verifiers_and_states_are_fresh_and_in_range():
    verifiers = {new_verifier() for _ in range(50)}

    assert len(verifiers) == 50
    assert all(43 <= len(v) <= 128 for v in verifiers)
    assert new_state() != new_state()


class TestFileStore:
    def test_a_saved_sign_in_is_owner_only_in_an_owner_only_directory(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path / "credentials")

        store.save("default", CREDENTIALS)

        assert stat.S_IMODE((tmp_path / "credentials").stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / "credentials" / "default.json").stat().st_mode) == 0o600
        assert store.load("default") == CREDENTIALS

    def test_a_file_others_may_read_is_refused(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path / "credentials")
        store.save("default", CREDENTIALS)
        os.chmod(tmp_path / "credentials" / "default.json", 0o644)  # noqa: PTH101

        with pytest.raises(CredentialsError, match="may be read by others"):
            store.load("default")

    def test_a_directory_others_may_enter_is_refused(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path / "credentials")
        store.save("default", CREDENTIALS)
        os.chmod(tmp_path / "credentials", 0o755)  # noqa: PTH101, S103 - the mistake under test

        with pytest.raises(CredentialsError, match="may be read by others"):
            store.load("default")
        with pytest.raises(CredentialsError):
            store.save("other", CREDENTIALS)

    def test_delete_forgets_and_says_whether_there_was_anything(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path / "credentials")
        store.save("default", CREDENTIALS)

        assert store.delete("default")
        assert not store.delete("default")
        assert store.load("default") is None

    def test_a_garbled_file_is_an_error_that_says_to_sign_in_again(self, tmp_path: Path) -> None:
        store = FileStore(tmp_path / "credentials")
        store.save("default", CREDENTIALS)
        (tmp_path / "credentials" / "default.json").write_text("{")

        with pytest.raises(CredentialsError, match="sign in again"):
            store.load("default")


def test_expiry_is_read_from_the_token_and_an_unreadable_one_counts_as_expired():
    assert expires_at(jwt_with({"exp": 1_900_000_000})) == 1_900_000_000
    assert expires_at("not-a-jwt") == 0
    assert expires_at(jwt_with({"sub": "no exp"})) == 0


class TestProfiles:
    def test_a_profile_round_trips_through_the_config_file(self) -> None:
        profile = Profile("prod", "https://api.example", "https://auth.example", "client1")

        save_profile(profile)

        assert load_profile("prod") == profile
        assert load_profile("other") is None

    def test_a_profile_comes_from_a_cdk_outputs_file(self, tmp_path: Path) -> None:
        outputs = tmp_path / "outputs.json"
        outlast = {
            "ApiUrl": "https://api.example",
            "AuthDomainUrl": "https://auth.example",
            "CliClientId": "c1",
        }
        outputs.write_text(json.dumps({"outlast": outlast, "other": {"ApiUrl": "https://x.example"}}))

        assert from_outputs_file("default", outputs, "outlast").client_id == "c1"
        with pytest.raises(ProfileError, match="2 stacks"):
            from_outputs_file("default", outputs, None)
        with pytest.raises(ProfileError, match="lack AuthDomainUrl, CliClientId"):
            from_outputs_file("default", outputs, "other")

    def test_a_profile_with_a_url_that_is_not_http_is_refused(self) -> None:
        with pytest.raises(ProfileError, match="sign-in URL"):
            Profile("p", "https://api.example", "file:///etc/passwd", "c1")
