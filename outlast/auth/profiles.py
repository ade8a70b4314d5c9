"""Where the CLI finds a stage: profiles in `<config dir>/config` (INI, like the AWS CLI's).

    [default]
    api_url = https://abc123.execute-api.eu-west-1.amazonaws.com
    auth_url = https://outlast-123456789012.auth.eu-west-1.amazoncognito.com
    client_id = 1example23456789

`outlast login` writes the profile it signed in with, from the stack's outputs (`--outputs
cdk-outputs.json`, or `--stack NAME` with AWS credentials), from a running local stack
(`--local`), or from the three values given. The config directory is $OUTLAST_CONFIG_DIR, else
$XDG_CONFIG_HOME/outlast, else ~/.config/outlast; the profile is --profile, else
$OUTLAST_PROFILE, else `default`.
"""

from __future__ import annotations

import configparser
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from outlast.api.http import check_api_url

CONFIG_DIR_ENV = "OUTLAST_CONFIG_DIR"
PROFILE_ENV = "OUTLAST_PROFILE"
DEFAULT_PROFILE = "default"
# The stack outputs a profile is made of (infra/names.py Output: the template publishes them).
API_URL_OUTPUT = "ApiUrl"
AUTH_URL_OUTPUT = "AuthDomainUrl"
CLIENT_ID_OUTPUT = "CliClientId"
_PROFILE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_CLIENT_ID = re.compile(r"[\w+]{1,128}")


class ProfileError(Exception):
    """No usable profile: what is missing, and how to get it."""


@dataclass(frozen=True)
class Profile:
    """One stage as the CLI reaches it: its API and where its users sign in."""

    name: str
    api_url: str
    auth_url: str
    client_id: str

    def __post_init__(self) -> None:
        for label, url in (("API URL", self.api_url), ("sign-in URL", self.auth_url)):
            try:
                check_api_url(url)
            except ValueError as error:
                raise ProfileError(f"the {label} of profile {self.name!r}: {error}") from None
        if not _CLIENT_ID.fullmatch(self.client_id):
            raise ProfileError(f"profile {self.name!r} has no valid client id")


def config_dir() -> Path:
    """The CLI's own directory (profiles and, without a keyring, credentials)."""
    if os.environ.get(CONFIG_DIR_ENV):
        return Path(os.environ[CONFIG_DIR_ENV])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "outlast"


def profile_name(given: str | None) -> str:
    """The profile a command uses: --profile, else $OUTLAST_PROFILE, else `default`."""
    name = given or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE
    if not _PROFILE_NAME.fullmatch(name):
        raise ProfileError(f"a profile name is 1-64 letters, digits, '.', '_' or '-', not {name!r}")
    return name


def _read_config() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    path = config_dir() / "config"
    if path.exists():
        parser.read(path, encoding="utf-8")
    return parser


def load_profile(name: str) -> Profile | None:
    """The profile, or None when it was never written."""
    parser = _read_config()
    if not parser.has_section(name):
        return None
    section = parser[name]
    try:
        return Profile(name, section["api_url"], section["auth_url"], section["client_id"])
    except KeyError as missing:
        raise ProfileError(f"profile {name!r} in {config_dir() / 'config'} lacks {missing}") from None


def save_profile(profile: Profile) -> Path:
    """Write (or replace) the profile; the directory is created owner-only."""
    directory = config_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    parser = _read_config()
    parser[profile.name] = {
        "api_url": profile.api_url,
        "auth_url": profile.auth_url,
        "client_id": profile.client_id,
    }
    path = directory / "config"
    with path.open("w", encoding="utf-8") as file:
        parser.write(file)
    return path


def from_outputs(name: str, outputs: dict[str, Any]) -> Profile:
    """A profile from a stack's outputs (`cdk deploy --outputs-file`, or DescribeStacks)."""
    missing = [key for key in (API_URL_OUTPUT, AUTH_URL_OUTPUT, CLIENT_ID_OUTPUT) if key not in outputs]
    if missing:
        raise ProfileError(
            f"the stack's outputs lack {', '.join(missing)}: deploy a version with `outlast login` support"
        )
    return Profile(
        name, str(outputs[API_URL_OUTPUT]), str(outputs[AUTH_URL_OUTPUT]), str(outputs[CLIENT_ID_OUTPUT])
    )


def from_outputs_file(name: str, path: Path, stack: str | None) -> Profile:
    """A profile from `cdk deploy --outputs-file FILE` ({stack name: {output: value}})."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ProfileError(f"cannot read {path}: {error}") from None
    stacks = {k: v for k, v in document.items() if isinstance(v, dict)} if isinstance(document, dict) else {}
    if stack is not None:
        if stack not in stacks:
            raise ProfileError(f"{path} holds no stack {stack!r} (it has: {', '.join(stacks) or 'none'})")
        return from_outputs(name, stacks[stack])
    if len(stacks) != 1:
        raise ProfileError(f"{path} holds {len(stacks)} stacks: name one with --stack")
    return from_outputs(name, next(iter(stacks.values())))


def from_stack(name: str, stack: str, region: str | None, aws_profile: str | None) -> Profile:
    """A profile from a deployed stack's outputs, read with the caller's AWS credentials (boto3)."""
    try:
        import boto3  # noqa: PLC0415 - only this way of finding a stack needs it
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415
    except ImportError:
        raise ProfileError(
            "--stack reads CloudFormation with boto3, which is not installed: "
            "`pip install 'outlast[ops]'`, or use --outputs FILE"
        ) from None
    try:
        session = boto3.Session(profile_name=aws_profile, region_name=region)
        found = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
    except (BotoCoreError, ClientError) as error:
        raise ProfileError(f"cannot read stack {stack!r}: {error}") from None
    outputs = {str(o["OutputKey"]): str(o["OutputValue"]) for o in found.get("Outputs", [])}
    return from_outputs(name, outputs)


def from_local_state(name: str, state: dict[str, Any]) -> Profile:
    """A profile for a running local stack: its front serves the API and /oauth2/* on one origin."""
    client_id = state.get("cliClientId")
    if not client_id:
        raise ProfileError("the local stack registers no CLI app client: restart it from this checkout")
    return Profile(name, str(state["apiUrl"]), str(state["apiUrl"]), str(client_id))
