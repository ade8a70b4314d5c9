"""Where a signed-in profile's tokens live: the OS keyring when one is available, else a file
that only its owner may read (0600, in a 0700 directory of the config directory).

A credentials file or directory that others could read is refused, not used: a refresh token
signs in for 30 days. `OUTLAST_KEYRING=0` keeps to the file even where a keyring exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from outlast.auth.profiles import config_dir

KEYRING_ENV = "OUTLAST_KEYRING"
KEYRING_SERVICE = "outlast"


class CredentialsError(Exception):
    """The stored credentials cannot be used safely (wrong permissions, unreadable)."""


@dataclass(frozen=True)
class Credentials:
    """One profile's tokens and who issued them (a refresh must go to the same client)."""

    id_token: str
    refresh_token: str
    auth_url: str
    client_id: str

    def to_json(self) -> str:
        """The stored form."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Credentials:
        """Read the stored form (CredentialsError when it is not one)."""
        try:
            document: Any = json.loads(text)
            return cls(
                **{key: str(document[key]) for key in ("id_token", "refresh_token", "auth_url", "client_id")}
            )
        except (ValueError, TypeError, KeyError):
            raise CredentialsError("the stored credentials are unreadable: sign in again") from None


class CredentialStore(Protocol):
    """Keeps one Credentials per profile."""

    @property
    def where(self) -> str:
        """Where they are kept, for people."""

    def load(self, profile: str) -> Credentials | None:
        """The profile's credentials, or None."""

    def save(self, profile: str, credentials: Credentials) -> None:
        """Keep the profile's credentials (replacing any)."""

    def delete(self, profile: str) -> bool:
        """Forget them; False when there were none."""


class FileStore:
    """`<config dir>/credentials/<profile>.json`, 0600 in a 0700 directory, both the user's own."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    @property
    def where(self) -> str:
        """The directory."""
        return str(self._directory)

    def _path(self, profile: str) -> Path:
        return self._directory / f"{profile}.json"

    def _check(self, path: Path, widest: int) -> None:
        info = path.stat()
        if info.st_uid != os.getuid():
            raise CredentialsError(f"{path} belongs to another user: refusing to use it")
        if stat.S_IMODE(info.st_mode) & ~widest:
            raise CredentialsError(
                f"{path} may be read by others (mode {stat.S_IMODE(info.st_mode):o}): refusing to use it; "
                f"`chmod {widest:o} {path}` if it is yours, or delete it and sign in again"
            )

    def load(self, profile: str) -> Credentials | None:
        """Read the file after checking it and its directory are owner-only."""
        path = self._path(profile)
        if not path.exists():
            return None
        self._check(self._directory, 0o700)
        self._check(path, 0o600)
        return Credentials.from_json(path.read_text(encoding="utf-8"))

    def save(self, profile: str, credentials: Credentials) -> None:
        """Write a new 0600 file beside the old one and move it over it (never a moment world-readable)."""
        self._directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._check(self._directory, 0o700)
        path = self._path(profile)
        temporary = path.with_suffix(".json.new")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(credentials.to_json())
        temporary.replace(path)

    def delete(self, profile: str) -> bool:
        """Remove the file."""
        try:
            self._path(profile).unlink()
        except FileNotFoundError:
            return False
        return True


class KeyringStore:
    """The OS keyring (macOS Keychain, Windows Credential Locker, Secret Service), via `keyring`."""

    def __init__(self, keyring: Any) -> None:
        self._keyring = keyring

    @property
    def where(self) -> str:
        """The keyring's backend."""
        return f"the OS keyring ({type(self._keyring.get_keyring()).__name__})"

    def load(self, profile: str) -> Credentials | None:
        """The stored item, if any."""
        text = self._keyring.get_password(KEYRING_SERVICE, profile)
        return None if text is None else Credentials.from_json(text)

    def save(self, profile: str, credentials: Credentials) -> None:
        """Store (replace) the item."""
        self._keyring.set_password(KEYRING_SERVICE, profile, credentials.to_json())

    def delete(self, profile: str) -> bool:
        """Delete the item."""
        if self._keyring.get_password(KEYRING_SERVICE, profile) is None:
            return False
        self._keyring.delete_password(KEYRING_SERVICE, profile)
        return True


def _usable_keyring() -> Any | None:
    if os.environ.get(KEYRING_ENV, "1") == "0":
        return None
    try:
        import keyring  # noqa: PLC0415 - optional (`outlast[keyring]`)
        from keyring.backends import fail  # noqa: PLC0415
    except ImportError:
        return None
    backend = keyring.get_keyring()
    # keyring falls back to a backend that fails every call when the OS offers none (a server, CI).
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 0) <= 0:
        return None
    return keyring


def default_store() -> CredentialStore:
    """The OS keyring when one is available, else the owner-only file."""
    keyring = _usable_keyring()
    if keyring is not None:
        return KeyringStore(keyring)
    return FileStore(config_dir() / "credentials")
